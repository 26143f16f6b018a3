package mailstore_test

import (
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestThrottles: a throttle holds until its time, is never shortened by a
// later one that reaches less far, counts the throttles in a row for the
// wait, and is counted per reason.
func TestThrottles(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	record := func(reason string, suggested time.Duration, at time.Time) mailstore.Throttle {
		var th mailstore.Throttle
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			th, err = mailstore.RecordThrottle(ctx, tx, "acct", reason, suggested, at, func(n int) time.Duration {
				if suggested > 0 {
					return suggested
				}
				return time.Duration(n) * time.Hour
			})
			return err
		}))
		return th
	}

	_, ok, err := mailstore.ActiveThrottle(ctx, pool, "acct", t0)
	require.NoError(t, err)
	require.False(t, ok)

	th := record("BandwidthExceeded", 0, t0)
	require.Equal(t, 1, th.Consecutive)
	require.True(t, th.Until.Equal(t0.Add(time.Hour)))
	require.Nil(t, th.SuggestedDelay)
	th = record("BandwidthExceeded", 0, t0.Add(time.Minute))
	require.Equal(t, 2, th.Consecutive)
	require.True(t, th.Until.Equal(t0.Add(time.Minute+2*time.Hour)), "the wait grows with throttles in a row")
	th = record("RequestThrottled", 5*time.Second, t0.Add(2*time.Minute))
	require.True(t, th.Until.Equal(t0.Add(time.Minute+2*time.Hour)), "a shorter wait does not shorten the pause")
	require.NotNil(t, th.SuggestedDelay)
	require.Equal(t, 5*time.Second, *th.SuggestedDelay)

	active, ok, err := mailstore.ActiveThrottle(ctx, pool, "acct", t0.Add(time.Hour))
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, "RequestThrottled", active.Reason)
	_, ok, err = mailstore.ActiveThrottle(ctx, pool, "acct", th.Until)
	require.NoError(t, err)
	require.False(t, ok, "over at its time")

	require.NoError(t, mailstore.ResetThrottles(ctx, pool, "acct"))
	th = record("Unavailable", 0, th.Until.Add(time.Minute))
	require.Equal(t, 1, th.Consecutive, "a completed pass starts the count over")

	counts, err := mailstore.ThrottleCounts(ctx, pool)
	require.NoError(t, err)
	require.Equal(t, []mailstore.ThrottleCount{
		{AccountKey: "acct", Reason: "BandwidthExceeded", Count: 2},
		{AccountKey: "acct", Reason: "RequestThrottled", Count: 1},
		{AccountKey: "acct", Reason: "Unavailable", Count: 1},
	}, counts)
	all, err := mailstore.Throttles(ctx, pool)
	require.NoError(t, err)
	require.Len(t, all, 1)
	require.Equal(t, "Unavailable", all[0].Reason)
}

// TestThrottledRunIsNeitherFailedNorSucceeded: a run its server throttled
// leaves the account's failed runs as they were when the next run begins,
// where a run that did not fail would clear them and a failed one add to
// them.
func TestThrottledRunIsNeitherFailedNorSucceeded(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)
	t0 := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
	begin := func(at time.Time) mailstore.AccountState {
		var st mailstore.AccountState
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			st, err = mailstore.BeginRun(ctx, tx, "acct", at)
			return err
		}))
		return st
	}
	begin(t0)
	require.NoError(t, mailstore.FailRun(ctx, pool, "acct", "MailboxUnavailable", t0))
	require.Equal(t, 1, begin(t0.Add(time.Hour)).ConsecutiveFailures)
	require.NoError(t, mailstore.ThrottleRun(ctx, pool, "acct"))
	require.Equal(t, 1, begin(t0.Add(2*time.Hour)).ConsecutiveFailures, "the throttled run did not clear the failure")
	require.NoError(t, mailstore.ThrottleRun(ctx, pool, "acct"))
	require.Equal(t, 1, begin(t0.Add(3*time.Hour)).ConsecutiveFailures, "nor did a second")
	require.Zero(t, begin(t0.Add(4*time.Hour)).ConsecutiveFailures, "a run that did not fail clears it")

	// A run that failed before it was throttled stays failed.
	require.NoError(t, mailstore.FailRun(ctx, pool, "acct", "MailboxUnavailable", t0.Add(4*time.Hour)))
	require.NoError(t, mailstore.ThrottleRun(ctx, pool, "acct"))
	require.Equal(t, 1, begin(t0.Add(5*time.Hour)).ConsecutiveFailures)
}
