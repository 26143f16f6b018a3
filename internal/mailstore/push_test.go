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
