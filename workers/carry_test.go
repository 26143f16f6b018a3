package workers_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestCarriedUnits: the units an account run and its passes hand on are
// run over the session that lists the folders, as carried jobs River shows
// completed and naming their carrier; with several folders at once only
// the first is carried, and a folder larger than one round keeps the
// session across its rounds.
func TestCarriedUnits(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		*syncBundle
	}
	// setup configures folders (the first INBOX) with n messages each.
	setup := func(t *testing.T, n int, folders ...string) *testBundle {
		t.Helper()
		b := &testBundle{setupSync(t)}
		for j, f := range folders {
			if f != "INBOX" {
				b.user.CreateFolder(f)
			}
			seed(t, b.user, f, n, uint64(70+j))
			b.env[fmt.Sprintf("MAILFATHOM_ACCOUNTS_0_FOLDERS_%d_ALIAS", j)] = f
			b.env[fmt.Sprintf("MAILFATHOM_ACCOUNTS_0_FOLDERS_%d_REMOTE_PATH", j)] = f
		}
		return b
	}
	// carriers returns, per kind, how many completed jobs the job of kind
	// carrierKind carried, and how many completed on their own.
	type count struct{ carried, own int }
	completed := func(t *testing.T, b *testBundle, kind, carrierKind string) count {
		t.Helper()
		byCarrier := b.completed(t, kind)
		return count{carried: byCarrier[carrierKind], own: byCarrier[""]}
	}
	// logins waits for Dovecot to log the logins it counted and returns
	// how many there were.
	logins := func(t *testing.T, b *testBundle, atLeast int) int {
		t.Helper()
		poll.UntilTrue(t, dovecot.LogWait, "Dovecot logged the logins", func() bool { return b.logins() >= atLeast })
		return b.logins()
	}

	t.Run("EveryFolderOfARunOverOneSession", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 4, "INBOX", "Work", "Lists")
		b.start(t)
		b.waitIdle(t)
		for _, f := range []string{"INBOX", "Work", "Lists"} {
			require.Len(t, b.stored(t, strings.ToUpper(f)), 4, f)
		}
		require.Equal(t, count{carried: 3}, completed(t, b, "folder_pass", "account_run"), "the run carried every pass")
		require.Equal(t, count{carried: 3}, completed(t, b, "reconcile_window", "account_run"),
			"each pass carried its window for the run that carried it")
		require.Equal(t, 1, logins(t, b, 1), "the listing, three passes and three windows over one login")
	})

	t.Run("WithSeveralFoldersAtOnceOnlyTheFirst", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 4, "INBOX", "Work", "Lists")
		b.env["MAILFATHOM_SYNC_MAX_CONCURRENT_FOLDERS_PER_ACCOUNT"] = "3"
		b.start(t)
		b.waitIdle(t)
		for _, f := range []string{"INBOX", "Work", "Lists"} {
			require.Len(t, b.stored(t, strings.ToUpper(f)), 4, f)
		}
		require.Equal(t, count{carried: 1, own: 2}, completed(t, b, "folder_pass", "account_run"),
			"the run carries the first; the others run beside it on sessions of their own")
		require.Equal(t, count{carried: 2}, completed(t, b, "reconcile_window", "folder_pass"),
			"each pass of its own carries its window")
		require.Equal(t, 3, logins(t, b, 3), "one login for the run and its first folder, one for each other folder")
	})

	t.Run("ALargeFolderKeepsItsSessionAcrossRounds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 35, "INBOX")
		b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "10"
		b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN"] = "1"
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "INBOX"), 35)
		require.Equal(t, count{carried: 1}, completed(t, b, "folder_pass", "account_run"), "one pass, carried, in four rounds")
		require.Equal(t, 1, logins(t, b, 1), "one login for the run and every round of its pass")
		out := b.lastPassOutput(t, "INBOX")
		require.Equal(t, strconv.Itoa(35), fmt.Sprint(out["checkpoint_uid"]))
	})
}
