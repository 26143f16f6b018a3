package mailstore_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestChangeReports: a report is taken once, keeps its first time until
// taken, and is per folder; the effective mode reports only changes.
func TestChangeReports(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)

	_, ok, err := mailstore.TakeChangeReport(ctx, pool, "acct", "INBOX")
	require.NoError(t, err)
	require.False(t, ok, "nothing reported yet")

	first := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	require.NoError(t, mailstore.ReportChange(ctx, pool, "acct", "INBOX", first))
	require.NoError(t, mailstore.ReportChange(ctx, pool, "acct", "INBOX", first.Add(time.Minute)))
	require.NoError(t, mailstore.RecordPass(ctx, pool, "acct", "INBOX", mailstore.PassCounts{Stored: 1}, true, first), "a pass's counts leave the report alone")
	_, ok, err = mailstore.TakeChangeReport(ctx, pool, "acct", "ARCHIVE")
	require.NoError(t, err)
	require.False(t, ok, "another folder has no report")
	at, ok, err := mailstore.TakeChangeReport(ctx, pool, "acct", "INBOX")
	require.NoError(t, err)
	require.True(t, ok)
	require.True(t, at.Equal(first), "the earliest report untaken is kept: %v", at)
	_, ok, err = mailstore.TakeChangeReport(ctx, pool, "acct", "INBOX")
	require.NoError(t, err)
	require.False(t, ok, "taken once")

	for _, step := range []struct {
		mode    string
		changed bool
	}{{mailstore.ModePush, true}, {mailstore.ModePush, false}, {mailstore.ModePolling, true}, {mailstore.ModePolling, false}, {mailstore.ModePush, true}} {
		changed, err := mailstore.SetEffectiveMode(ctx, pool, "acct", "INBOX", step.mode)
		require.NoError(t, err)
		require.Equal(t, step.changed, changed, step.mode)
	}
	_, err = mailstore.SetEffectiveMode(ctx, pool, "acct", "INBOX", "Sometimes")
	require.Error(t, err, "only the two modes are stored")
}

// TestObservedStates: what a pass observed is recorded per folder, the
// latest replacing the one before, a HIGHESTMODSEQ of all 64 bits
// included; a folder no pass completed has none.
func TestObservedStates(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)
	got, err := mailstore.ObservedStates(ctx, pool, "acct")
	require.NoError(t, err)
	require.Empty(t, got)

	require.NoError(t, mailstore.ReportChange(ctx, pool, "acct", "ARCHIVE", time.Now()))
	first := mailstore.ObservedState{BindingID: 7, UIDValidity: 1 << 31, UIDNext: 1<<32 - 1, Exists: 3, HighestModSeq: 1<<64 - 1}
	require.NoError(t, mailstore.RecordObservedState(ctx, pool, "acct", "INBOX", first))
	got, err = mailstore.ObservedStates(ctx, pool, "acct")
	require.NoError(t, err)
	require.Equal(t, map[string]mailstore.ObservedState{"INBOX": first}, got, "ARCHIVE has a row but no observation")

	later := mailstore.ObservedState{BindingID: 8, UIDValidity: 5, UIDNext: 9, Exists: 2}
	require.NoError(t, mailstore.RecordObservedState(ctx, pool, "acct", "INBOX", later))
	got, err = mailstore.ObservedStates(ctx, pool, "acct")
	require.NoError(t, err)
	require.Equal(t, map[string]mailstore.ObservedState{"INBOX": later}, got)
	other, err := mailstore.ObservedStates(ctx, pool, "other")
	require.NoError(t, err)
	require.Empty(t, other)
}

// TestSubscriptionRetryAt: when a declined subscription is asked for
// again is kept per account until replaced.
func TestSubscriptionRetryAt(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)
	at, err := mailstore.SubscriptionRetryAt(ctx, pool, "acct")
	require.NoError(t, err)
	require.True(t, at.IsZero())
	when := time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC)
	require.NoError(t, mailstore.SetSubscriptionRetryAt(ctx, pool, "acct", when))
	require.NoError(t, mailstore.SetSubscriptionRetryAt(ctx, pool, "acct", when.Add(time.Minute)))
	at, err = mailstore.SubscriptionRetryAt(ctx, pool, "acct")
	require.NoError(t, err)
	require.True(t, at.Equal(when.Add(time.Minute)), "%v", at)
	at, err = mailstore.SubscriptionRetryAt(ctx, pool, "other")
	require.NoError(t, err)
	require.True(t, at.IsZero())
}
