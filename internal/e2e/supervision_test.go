package e2e

import (
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
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

	tag, err := b.pool.Exec(t.Context(), `UPDATE river_job SET state = 'cancelled', finalized_at = now()
		WHERE kind = 'account_run' AND state IN ('scheduled', 'available')`)
	require.NoError(t, err)
	require.EqualValues(t, 1, tag.RowsAffected(), "the account's next run was cancelled")
	cancelled := time.Now()

	require.Eventually(t, func() bool {
		var n int
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job
			WHERE kind = 'account_run' AND state IN ('scheduled', 'available', 'running', 'completed')
			  AND created_at > $1`, cancelled).Scan(&n))
		return n > 0
	}, 10*time.Second, 100*time.Millisecond, "a new run within the interval")
	t.Logf("replaced after %v", time.Since(cancelled).Round(100*time.Millisecond))
	p.waitLog(t, "the account had no next run (cancelled, deleted or discarded); one is scheduled now", 5*time.Second)

	resp, err := http.Get("http://" + p.addr(t) + "/metrics")
	require.NoError(t, err)
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	require.NoError(t, resp.Body.Close())
	require.Contains(t, string(body), "mailfathom_account_runs_repaired_total 1")
}
