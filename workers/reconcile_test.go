package workers_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// reconciled reads the local state of one folder: flags and tombstones by
// UID (erased rows are absent).
func (b *syncBundle) reconciled(t *testing.T) map[int64]string {
	t.Helper()
	rows, err := b.pool.Query(context.Background(), `
		SELECT uid, array_to_string(remote_flags, ' ') || CASE WHEN remote_expunge_observed_at IS NULL THEN '' ELSE ' [tombstone]' END
		FROM stored_emails ORDER BY uid`)
	require.NoError(t, err)
	out := map[int64]string{}
	for rows.Next() {
		var uid int64
		var state string
		require.NoError(t, rows.Scan(&uid, &state))
		out[uid] = state
	}
	require.NoError(t, rows.Err())
	return out
}

func TestReconciliation(t *testing.T) {
	t.Parallel()

	// scenario syncs 6 messages, changes the server (a flag set, a flag
	// cleared, two expunged), runs again, and returns the local state.
	scenario := func(t *testing.T, disposition string, opts ...dovecot.Option) (*syncBundle, map[int64]string) {
		t.Helper()
		b := setupSync(t, opts...)
		b.env["MAILFATHOM_ACCOUNTS_0_REMOTELY_DELETED_EMAIL_DISPOSITION"] = disposition
		seed(t, b.user, "INBOX", 6, 20)
		b.user.SetFlags("INBOX", 4, []imap.Flag{imap.FlagAnswered}, nil)
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "INBOX"), 6)

		b.user.SetFlags("INBOX", 1, []imap.Flag{imap.FlagFlagged}, nil)
		b.user.SetFlags("INBOX", 4, nil, []imap.Flag{imap.FlagAnswered})
		b.user.Expunge("INBOX", 2, 5)
		b.runAgain(t)
		// A second window over the now-observed mail: narrowed where the
		// server reports modification sequences, and nothing changes.
		b.runAgain(t)
		return b, b.reconciled(t)
	}

	want := map[int64]string{1: `\Flagged`, 2: ` [tombstone]`, 3: ``, 4: ``, 5: ` [tombstone]`, 6: ``}

	for name, opts := range map[string][]dovecot.Option{
		"QResync":   nil,
		"CondStore": {dovecot.WithCapability("IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN CONDSTORE ESEARCH")},
		"Plain":     {dovecot.WithCapability("IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN")},
	} {
		t.Run(name+"ReachesTheSameEndState", func(t *testing.T) {
			t.Parallel()
			b, got := scenario(t, "RetainTombstone", opts...)
			require.Equal(t, want, got)
			assertUnseen(t, b.user, "INBOX")
			require.Contains(t, b.logs.String(), "messages left the folder on the server")
			if name != "Plain" {
				var modseq *int64
				require.NoError(t, b.pool.QueryRow(context.Background(),
					`SELECT highest_modseq FROM synchronization_checkpoints`).Scan(&modseq))
				require.NotNil(t, modseq, "a pass that emptied the queue records the folder's modification sequence")
			}
		})
	}

	t.Run("EraseLocalCopyRemovesTheRows", func(t *testing.T) {
		t.Parallel()
		b, got := scenario(t, "EraseLocalCopy")
		require.Equal(t, map[int64]string{1: `\Flagged`, 3: ``, 4: ``, 6: ``}, got)
		var contents int
		require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT count(*) FROM email_message_contents`).Scan(&contents))
		require.Equal(t, 4, contents)
	})
}

// TestReconciliationConfirmsAMassDisappearance expunges most of a folder:
// the report crosses the misreport guard's threshold, the confirming search
// agrees, and the disappearances are applied.
func TestReconciliationConfirmsAMassDisappearance(t *testing.T) {
	t.Parallel()
	b := setupSync(t)
	seed(t, b.user, "INBOX", 20, 21)
	b.start(t)
	b.waitIdle(t)
	var gone []imap.UID
	for uid := imap.UID(1); uid <= 15; uid++ {
		gone = append(gone, uid)
	}
	b.user.Expunge("INBOX", gone...)
	b.runAgain(t)
	got := b.reconciled(t)
	tombstones := 0
	for _, state := range got {
		if state == " [tombstone]" {
			tombstones++
		}
	}
	require.Equal(t, 15, tombstones)
	require.NotContains(t, b.logs.String(), "a search still finds")
}

// TestReconciliationNarrowsFromTheFirstSynchronization: a folder larger
// than the window is current from the end of its first synchronization,
// which was its first reconciliation cycle: the next run's window asks the
// whole folder what changed, and a flag changed on mail no window has
// reached yet is reflected by it.
func TestReconciliationNarrowsFromTheFirstSynchronization(t *testing.T) {
	t.Parallel()
	b := setupSync(t)
	b.env["MAILFATHOM_SYNC_MAX_RECONCILED_EMAILS_PER_RUN"] = "4"
	seed(t, b.user, "INBOX", 10, 23)
	b.start(t)
	b.waitIdle(t)
	var modseq *int64
	require.NoError(t, b.pool.QueryRow(context.Background(), `SELECT highest_modseq FROM synchronization_checkpoints`).Scan(&modseq))
	require.NotNil(t, modseq, "the first synchronization records the folder's modification sequence")
	require.Contains(t, b.logs.String(), `"cycle":"started,completed"`, "the folder pass says so")

	b.user.SetFlags("INBOX", 9, []imap.Flag{imap.FlagFlagged}, nil)
	b.runAgain(t)
	require.Equal(t, `\Flagged`, b.reconciled(t)[9], "the window after the first synchronization saw the flag")
	assertUnseen(t, b.user, "INBOX")
}

// TestReconciliationConvergesWithoutStarvingObservedMail keeps a folder
// larger than the window on a server without modification sequences, so
// every run asks one window, and adds mail before every run: the new mail,
// observed by its fetch, queues behind the old, previously observed mail
// keeps being asked about, and no message stays unobserved.
func TestReconciliationConvergesWithoutStarvingObservedMail(t *testing.T) {
	t.Parallel()
	b := setupSync(t, dovecot.WithCapability("IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN"))
	b.env["MAILFATHOM_SYNC_MAX_RECONCILED_EMAILS_PER_RUN"] = "4"
	seed(t, b.user, "INBOX", 10, 22)
	b.start(t)
	b.waitIdle(t)
	ctx := context.Background()

	observedAt := func(uid int) *time.Time {
		var at *time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT remote_flags_observed_at FROM stored_emails WHERE uid = $1`, uid).Scan(&at))
		return at
	}
	first := observedAt(1)
	require.NotNil(t, first, "the first synchronization observed the flags it fetched")

	var seen []time.Time
	for i := range 6 {
		b.user.Append("INBOX", mailgen.Message(22, 100+i, 1500), time.Now())
		b.runAgain(t)
		seen = append(seen, *observedAt(1))
	}
	require.True(t, seen[len(seen)-1].After(*first), "previously observed mail is asked about again despite new arrivals")

	// A quiet folder keeps reconciling until every message was observed.
	for range 6 {
		b.runAgain(t)
	}
	var never int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM stored_emails WHERE remote_flags_observed_at IS NULL`).Scan(&never))
	require.Zero(t, never)
}

// TestOneLoginPerRun: an account run lists the folders, goes on to the
// folder's pass over the same session, and the pass to the reconciliation
// window after it, so a run costs the server one login, however many
// units River shows: the pass and the window are carried jobs, completed
// by the run that carried them.
func TestOneLoginPerRun(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSync(t)
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	seed(t, b.user, "INBOX", 3, 61)
	b.start(t)
	b.waitIdle(t)
	b.user.SetFlags("INBOX", 2, []imap.Flag{imap.FlagFlagged}, nil)
	b.runAgain(t)
	require.Equal(t, map[int64]string{1: ``, 2: `\Flagged`, 3: ``}, b.reconciled(t), "the second run's window saw the flag")

	var runs, passes, windows int
	require.NoError(t, b.pool.QueryRow(ctx, `
		SELECT count(*) FILTER (WHERE kind = 'account_run'),
		       count(*) FILTER (WHERE kind = 'folder_pass' AND metadata ? 'carried_by'),
		       count(*) FILTER (WHERE kind = 'reconcile_window' AND metadata ? 'carried_by')
		FROM river_job WHERE state = 'completed'`).Scan(&runs, &passes, &windows))
	require.Equal(t, []int{2, 2, 2}, []int{runs, passes, windows}, "two runs, each carrying its pass and its window")
	logins := func() int { return strings.Count(b.server.Log(), "Login: user=<"+b.user.Name()+">") }
	// Dovecot's log process writes a login's line a moment after it.
	poll.UntilTrue(t, dovecot.LogWait, "Dovecot logged the runs' logins", func() bool { return logins() >= runs })
	require.Equal(t, runs, logins(), "one login for each of %d runs", runs)
}
