package workers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// reconciled reads the local state of one folder: flags and tombstones by
// UID (erased rows are absent).
func (b *syncBundle) reconciled(t *testing.T) map[int64]string {
	t.Helper()
	out := map[int64]string{}
	for _, o := range dbassert.Occurrences(t, b.pool, "") {
		out[int64(o.UID)] = o.State()
	}
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
				require.NotNil(t, dbassert.Checkpoint(t, b.pool, "INBOX").HighestModSeq,
					"a pass that emptied the queue records the folder's modification sequence")
			}
		})
	}

	t.Run("EraseLocalCopyRemovesTheRows", func(t *testing.T) {
		t.Parallel()
		b, got := scenario(t, "EraseLocalCopy")
		require.Equal(t, map[int64]string{1: `\Flagged`, 3: ``, 4: ``, 6: ``}, got)
		require.Equal(t, 4, dbassert.Counts(t, b.pool).Contents)
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
	require.NotNil(t, dbassert.Checkpoint(t, b.pool, "INBOX").HighestModSeq,
		"the first synchronization records the folder's modification sequence")
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

	observedAt := func(uid uint32) *time.Time {
		for _, o := range dbassert.Occurrences(t, b.pool, "INBOX") {
			if o.UID == uid {
				return o.FlagsObservedAt
			}
		}
		require.Failf(t, "not stored", "UID %d", uid)
		return nil
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
	never := 0
	for _, o := range dbassert.Occurrences(t, b.pool, "") {
		if o.FlagsObservedAt == nil {
			never++
		}
	}
	require.Zero(t, never)
}

// TestOneLoginPerRun: an account run lists the folders, goes on to the
// folder's pass over the same session, and the pass to the reconciliation
// window after it, so a run costs the server one login, however many
// units River shows: the pass and the window are carried jobs, completed
// by the run that carried them.
func TestOneLoginPerRun(t *testing.T) {
	t.Parallel()
	b := setupSync(t)
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	seed(t, b.user, "INBOX", 3, 61)
	b.start(t)
	b.waitIdle(t)
	b.user.SetFlags("INBOX", 2, []imap.Flag{imap.FlagFlagged}, nil)
	b.runAgain(t)
	require.Equal(t, map[int64]string{1: ``, 2: `\Flagged`, 3: ``}, b.reconciled(t), "the second run's window saw the flag")

	runs := dbassert.JobCount(t, b.pool, "account_run", rivertype.JobStateCompleted)
	passes, windows := carried(b.completed(t, "folder_pass")), carried(b.completed(t, "reconcile_window"))
	require.Equal(t, []int{2, 2, 2}, []int{runs, passes, windows}, "two runs, each carrying its pass and its window")
	logins := func() int { return strings.Count(b.server.Log(), "Login: user=<"+b.user.Name()+">") }
	// Dovecot's log process writes a login's line a moment after it.
	poll.Until(t, dovecot.LogWait, "Dovecot logged the runs' logins", func() (bool, string) {
		n := logins()
		return n >= runs, fmt.Sprintf("%d logins, %d runs", n, runs)
	})
	require.Equal(t, runs, logins(), "one login for each of %d runs", runs)
}
