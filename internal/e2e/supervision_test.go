package e2e

import (
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestCancelledAccountRunIsReplaced: an operator who cancels an account's
// next run (River UI's Cancel, or SQL) does not stop the account: the
// maintenance leader schedules a new one within the interval, says so at
// Warning and counts it.
func TestCancelledAccountRunIsReplaced(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.URL(t))
	b.env["MAILFATHOM_SYNC_INTERVAL"] = "10s"
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "10s"
	u := b.server.NewUser()
	seedCorpus(t, u, "INBOX", 3, 7, 4)
	b.addAccount(t, "watched", u)
	p := b.start(t, "serve")
	b.waitSynced(t, p, 3, time.Minute)

	n := dbassert.CancelJobs(t, b.pool, "account_run", rivertype.JobStateScheduled, rivertype.JobStateAvailable)
	require.EqualValues(t, 1, n, "the account's next run was cancelled")
	cancelled := time.Now()

	var runs []string
	poll.Every(t, 100*time.Millisecond, 10*time.Second, "a new run within the interval", func() bool {
		runs = nil
		replaced := false
		for _, j := range dbassert.Jobs(t, b.pool, "account_run") {
			runs = append(runs, fmt.Sprintf("%d %s created %s", j.ID, j.State, j.CreatedAt.Format("15:04:05.000")))
			switch j.State {
			case rivertype.JobStateScheduled, rivertype.JobStateAvailable, rivertype.JobStateRunning, rivertype.JobStateCompleted:
				replaced = replaced || j.CreatedAt.After(cancelled)
			}
		}
		return replaced
	}, func() string {
		return fmt.Sprintf("cancelled at %s; account runs: %v", cancelled.Format("15:04:05.000"), runs)
	})
	t.Logf("replaced after %v", time.Since(cancelled).Round(100*time.Millisecond))
	p.waitLog(t, "the account had no next run (cancelled, deleted or discarded); one is scheduled now", 5*time.Second)

	resp, err := http.Get("http://" + p.addr(t) + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Contains(t, string(body), "mailfathom_account_runs_repaired_total 1")
}
