package mailstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestDownloadBudgetIsARollingWindow: claims share out at most the budget
// across passes and accounts stay apart; what a pass downloaded replaces
// its claim; a pass that stopped before a message the window cannot hold
// pauses the account until enough of the window has expired — a day
// after the bytes were counted, to the hour — and the next claim after
// that continues.
func TestDownloadBudgetIsARollingWindow(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)
	const budget = 1000
	t0 := time.Date(2026, 3, 1, 10, 20, 0, 0, time.UTC)

	claim := func(account string, share int64, now time.Time) (mailstore.DownloadClaim, time.Time) {
		var (
			c      mailstore.DownloadClaim
			resume time.Time
		)
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			c, resume, err = mailstore.ClaimDownload(ctx, tx, account, budget, share, now)
			return err
		}))
		return c, resume
	}
	settle := func(account string, c mailstore.DownloadClaim, downloaded, needed int64, now time.Time) (time.Time, bool) {
		var (
			resume time.Time
			paused bool
		)
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			resume, paused, err = mailstore.SettleDownload(ctx, tx, account, c, downloaded, needed, budget, now)
			return err
		}))
		return resume, paused
	}

	// Two passes at once each get their share; a third gets what is left.
	a, _ := claim("acct", 400, t0)
	b, _ := claim("acct", 400, t0)
	c, _ := claim("acct", 400, t0)
	require.EqualValues(t, 400, a.Bytes)
	require.EqualValues(t, 400, b.Bytes)
	require.EqualValues(t, 200, c.Bytes, "never more than the budget in all")
	other, _ := claim("other", 400, t0)
	require.EqualValues(t, 400, other.Bytes, "accounts have budgets of their own")

	// b and c end having downloaded less; a stops before a 300-byte
	// message an hour later.
	_, paused := settle("acct", b, 100, 0, t0.Add(time.Minute))
	require.False(t, paused)
	_, paused = settle("acct", c, 0, 0, t0.Add(time.Minute))
	require.False(t, paused)
	d, _ := claim("acct", 1000, t0.Add(2*time.Minute))
	require.EqualValues(t, 500, d.Bytes, "what b and c did not download is free again")
	_, paused = settle("acct", d, 450, 0, t0.Add(3*time.Minute))
	require.False(t, paused)
	at := t0.Add(time.Hour)
	resume, paused := settle("acct", a, 400, 300, at)
	require.True(t, paused, "950 of 1000 are used; a 300-byte message waits")
	// 550 bytes were counted in the hour of t0 (10:00) and 400 in 11:00:
	// room for 300 comes when the 10:00 hour leaves the window.
	require.True(t, time.Date(2026, 3, 2, 11, 0, 0, 0, time.UTC).Equal(resume), "%v", resume)

	states := downloadStates(ctx, t, pool, at)
	require.EqualValues(t, 950, states["acct"].Used)
	require.NotNil(t, states["acct"].PausedUntil)
	require.True(t, states["acct"].PausedUntil.Equal(resume))

	// Before then nothing is claimed, whatever the share.
	e, again := claim("acct", 1000, resume.Add(-time.Minute))
	require.Zero(t, e.Bytes)
	require.True(t, again.Equal(resume), "%v", again)
	// From then on the 10:00 hour is out of the window.
	f, _ := claim("acct", 1000, resume)
	require.EqualValues(t, 600, f.Bytes, "the 11:00 hour's 400 still count")
	_, paused = settle("acct", f, 300, 0, resume.Add(time.Minute))
	require.False(t, paused)
	require.Nil(t, downloadStates(ctx, t, pool, resume.Add(time.Minute))["acct"].PausedUntil, "the pause is over")
	// A day and an hour after the last bytes, the window is empty.
	g, _ := claim("acct", 1000, resume.Add(25*time.Hour))
	require.EqualValues(t, 1000, g.Bytes)
}

func downloadStates(ctx context.Context, t *testing.T, q mailstore.Querier, now time.Time) map[string]mailstore.DownloadState {
	t.Helper()
	states, err := mailstore.DownloadStates(ctx, q, now)
	require.NoError(t, err)
	out := map[string]mailstore.DownloadState{}
	for _, s := range states {
		out[s.AccountKey] = s
	}
	return out
}
