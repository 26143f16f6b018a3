package e2e

import (
	"context"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestMutateFromTwoProcesses: two `mailfathom mutate` processes ask for the
// same change under the same request id at the same moment; one change is
// recorded, both print it, and the serving process carries it out once —
// the message is in the destination exactly once and gone from the source,
// checked over a connection of its own.
func TestMutateFromTwoProcesses(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.URL(t))
	user := b.server.NewUser()
	user.CreateFolder("Filed")
	seedCorpus(t, user, "INBOX", 3, 31, 8)
	b.addAccount(t, "movers", user, folderMapping{"inbox", "INBOX"}, folderMapping{"filed", "Filed"})
	p := b.start(t, "serve")
	b.waitSynced(t, p, 3, time.Minute)

	var emailID string
	require.NoError(t, b.pool.QueryRow(context.Background(), `
		SELECT e.id::text FROM stored_emails e JOIN mail_folders f ON f.id = e.mail_folder_id
		WHERE f.alias = 'INBOX' AND e.uid = 1`).Scan(&emailID))

	outs := make([]string, 2)
	errs := make([]error, 2)
	var wg sync.WaitGroup
	for i := range outs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(binary(t), "mutate", "-request-id", "same-request", "move", emailID, "filed")
			cmd.Env = fromEnv(b.env)
			out, err := cmd.CombinedOutput()
			outs[i], errs[i] = string(out), err
		}()
	}
	wg.Wait()
	for i := range outs {
		require.NoError(t, errs[i], outs[i])
	}
	id0, id1 := strings.Fields(outs[0])[0], strings.Fields(outs[1])[0]
	require.Equal(t, id0, id1, "both processes name the one change")
	require.Equal(t, 1, strings.Count(outs[0]+outs[1], "already recorded"), "one recorded it, the other found it")

	deadline := time.Now().Add(time.Minute)
	for {
		var state string
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT state FROM mailbox_mutations WHERE id = $1`, id0).Scan(&state))
		if state == "Completed" {
			break
		}
		require.True(t, time.Now().Before(deadline) && p.running(), "the mutation did not complete: %s; log:\n%s", state, tailLines(p.rawLog(), 40))
		time.Sleep(100 * time.Millisecond)
	}
	var n int
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM mailbox_mutations`).Scan(&n))
	require.Equal(t, 1, n)
	require.NotContains(t, user.UIDs("INBOX"), imap.UID(1))
	require.Len(t, user.UIDs("Filed"), 1)

	cmd := exec.Command(binary(t), "mutations", "-state", "completed")
	cmd.Env = fromEnv(b.env)
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Contains(t, string(out), id0)
	p.stop(t)
}
