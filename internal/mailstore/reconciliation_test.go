package mailstore_test

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

func TestReconciliation(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool    *pgxpool.Pool
		binding mailstore.Binding
		ids     map[uint32]uuid.UUID
	}

	// setup stores n occurrences (UIDs 1..n, UIDVALIDITY 7) with content.
	setup := func(t *testing.T, n int) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		b, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		ids := map[uint32]uuid.UUID{}
		for uid := uint32(1); uid <= uint32(n); uid++ {
			id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: b.ID,
				UIDValidity: 7, UID: uid, Size: 5, Raw: []byte("x: y\r\n\r\nz"), Availability: mailstore.Available})
			require.NoError(t, err)
			ids[uid] = id
		}
		return ctx, &testBundle{pool: pool, binding: b, ids: ids}
	}

	// answer builds a server answer: every UID present unless gone, flags
	// described for the listed ones.
	answer := func(w mailstore.ReconcileWindow, gone []uint32, flags map[uint32][]string) mailstore.ReconcileAnswer {
		a := mailstore.ReconcileAnswer{Present: map[uint32]bool{}, Flags: flags}
		isGone := map[uint32]bool{}
		for _, u := range gone {
			isGone[u] = true
		}
		for _, u := range w.UIDs() {
			if !isGone[u] {
				a.Present[u] = true
			}
		}
		return a
	}

	t.Run("WindowQueriesAreIndexOnlyScans", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, 40)
		w, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 7, 20)
		require.NoError(t, err)
		_, err = mailstore.ApplyReconciliation(ctx, b.pool, w, answer(w, nil, nil), mailstore.RetainTombstone)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `ANALYZE stored_emails`)
		require.NoError(t, err)

		// A table this small is cheaper to scan whole; what is asserted is
		// that the indexes alone can answer both queries, in order.
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(ctx) }()
		_, err = tx.Exec(ctx, `SET LOCAL enable_seqscan = off; SET LOCAL enable_bitmapscan = off`)
		require.NoError(t, err)
		observed, never, err := mailstore.ExplainReconcileWindow(ctx, tx, b.binding.ID, 7, 10)
		require.NoError(t, err)
		for _, plan := range []string{observed, never} {
			require.Contains(t, plan, "Index Only Scan", plan)
			require.NotContains(t, plan, "Sort", plan)
		}
		require.Contains(t, observed, "ix_stored_emails_reconciliation_queue")
		require.Contains(t, never, "ix_stored_emails_never_observed")
	})

	t.Run("WindowReservesHalfForObservedMailOnlyAsFarAsThereIsSome", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, 30)

		// A first pass: nothing observed yet, the whole window goes to
		// never-observed mail in UID order.
		w, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 7, 10)
		require.NoError(t, err)
		require.Equal(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, w.UIDs())
		require.False(t, w.Exhausted)
		_, err = mailstore.ApplyReconciliation(ctx, b.pool, w, answer(w, nil, nil), mailstore.RetainTombstone)
		require.NoError(t, err)

		// Now 10 observed, 20 never observed: half and half.
		w, err = mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 7, 10)
		require.NoError(t, err)
		require.Equal(t, 5, w.Observed)
		require.Equal(t, 5, w.NeverObserved)
		require.Equal(t, []uint32{1, 2, 3, 4, 5, 11, 12, 13, 14, 15}, w.UIDs())

		// A different UIDVALIDITY selects nothing: it can never delete.
		other, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 8, 10)
		require.NoError(t, err)
		require.Empty(t, other.Entries)
	})

	t.Run("NewMailObservedByItsFetchQueuesBehindOldMail", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, 20)
		store := func(first, n uint32, observed time.Time) {
			t.Helper()
			for uid := first; uid < first+n; uid++ {
				_, err := mailstore.UpsertOccurrence(ctx, b.pool, mailstore.Occurrence{AccountID: b.binding.AccountID, FolderID: b.binding.ID,
					UIDValidity: 7, UID: uid, Size: 5, Raw: []byte("x: y\r\n\r\nz"), Availability: mailstore.Available,
					FlagsObservedAt: observed})
				require.NoError(t, err)
			}
		}
		window := func(size int) mailstore.ReconcileWindow {
			t.Helper()
			w, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 7, size)
			require.NoError(t, err)
			_, err = mailstore.ApplyReconciliation(ctx, b.pool, w, answer(w, nil, nil), mailstore.RetainTombstone)
			require.NoError(t, err)
			return w
		}
		uids := func(first, last uint32) []uint32 {
			var out []uint32
			for u := first; u <= last; u++ {
				out = append(out, u)
			}
			return out
		}
		// Old mail, every row observed once.
		require.Len(t, window(20).Entries, 20)

		// A flood of new mail, each observed by its fetch: it queues behind
		// the old mail, which the next windows keep asking about first.
		store(21, 100, time.Now())
		w := window(10)
		require.Equal(t, uids(1, 10), w.UIDs())
		require.Equal(t, 10, w.Observed)
		require.Equal(t, uids(11, 20), window(10).UIDs())
		require.Equal(t, uids(21, 30), window(10).UIDs(), "then the new mail, in the order it was fetched")

		// Mail stored without an observation (as a relocation carries it
		// in) is asked about first, but within its half of the window.
		store(121, 30, time.Time{})
		w = window(10)
		require.Equal(t, 5, w.Observed)
		require.Equal(t, 5, w.NeverObserved)
		require.Equal(t, append(uids(31, 35), uids(121, 125)...), w.UIDs())
	})

	t.Run("ApplyRefreshesConfirmsAndTombstones", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, 6)
		w, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 7, 500)
		require.NoError(t, err)
		require.True(t, w.Exhausted)

		r, err := mailstore.ApplyReconciliation(ctx, b.pool, w, answer(w, []uint32{2, 5}, map[uint32][]string{1: {`\Seen`, `\Flagged`}, 3: {}}),
			mailstore.RetainTombstone)
		require.NoError(t, err)
		require.Equal(t, mailstore.ReconcileResult{Refreshed: 2, Confirmed: 2, Tombstoned: 2}, r)

		var flags []string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT remote_flags FROM stored_emails WHERE id = $1`, b.ids[1]).Scan(&flags))
		require.Equal(t, []string{`\Seen`, `\Flagged`}, flags)
		var tombstone time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT remote_expunge_observed_at FROM stored_emails WHERE id = $1`, b.ids[2]).Scan(&tombstone))

		// Replaying the same window changes nothing: every row was observed
		// after the window was taken.
		again, err := mailstore.ApplyReconciliation(ctx, b.pool, w, answer(w, []uint32{1, 2, 3, 4, 5, 6}, nil), mailstore.EraseLocalCopy)
		require.NoError(t, err)
		require.Equal(t, mailstore.ReconcileResult{Superseded: 6}, again)
		var rows int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM stored_emails`).Scan(&rows))
		require.Equal(t, 6, rows)
		var still time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT remote_expunge_observed_at FROM stored_emails WHERE id = $1`, b.ids[2]).Scan(&still))
		require.Equal(t, tombstone, still, "a tombstone keeps the time it was first observed")

		// Tombstoned mail is outside every later window.
		w, err = mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 7, 500)
		require.NoError(t, err)
		require.Len(t, w.Entries, 4)
	})

	t.Run("EraseRemovesTheLocalCopyAndWhatHangsOffIt", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, 3)
		w, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.binding.ID, 7, 500)
		require.NoError(t, err)
		r, err := mailstore.ApplyReconciliation(ctx, b.pool, w, answer(w, []uint32{2}, nil), mailstore.EraseLocalCopy)
		require.NoError(t, err)
		require.Equal(t, 1, r.Erased)
		var emails, contents int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM stored_emails), (SELECT count(*) FROM email_message_contents)`).Scan(&emails, &contents))
		require.Equal(t, 2, emails)
		require.Equal(t, 2, contents)
	})

	// On a folder of 200 000 stored rows, both window queries are an
	// index scan with no sort step that reads only its limit.
	t.Run("BothWindowQueriesUseAnIndexWithoutSorting", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, 1)
		// Enough rows that the planner prefers the index.
		_, err := b.pool.Exec(ctx, `
			INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability, remote_flags_observed_at)
			SELECT gen_random_uuid(), $1, $2, 7, g, 'NotFetched', CASE WHEN g % 2 = 0 THEN now() - g * interval '1 second' END
			FROM generate_series(2, 30000) g`, b.binding.AccountID, b.binding.ID)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `ANALYZE stored_emails`)
		require.NoError(t, err)
		for _, q := range []string{
			`SELECT id, uid FROM stored_emails WHERE mail_folder_id = %d AND uid_validity = 7
			   AND remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NOT NULL
			 ORDER BY remote_flags_observed_at, uid LIMIT 250`,
			`SELECT id, uid FROM stored_emails WHERE mail_folder_id = %d AND uid_validity = 7
			   AND remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NULL
			 ORDER BY uid LIMIT 250`,
		} {
			var plan strings.Builder
			rows, err := b.pool.Query(ctx, "EXPLAIN (ANALYZE, TIMING OFF) "+fmt.Sprintf(q, b.binding.ID))
			require.NoError(t, err)
			for rows.Next() {
				var line string
				require.NoError(t, rows.Scan(&line))
				plan.WriteString(line + "\n")
			}
			require.NoError(t, rows.Err())
			require.Contains(t, plan.String(), "Index", plan.String())
			require.NotContains(t, plan.String(), "Sort", plan.String())
			// The index scan reads only what the limit asks for.
			for _, line := range strings.Split(plan.String(), "\n") {
				if strings.Contains(line, "Index") && strings.Contains(line, "actual") {
					require.Contains(t, line, "rows=250 ", plan.String())
				}
			}
		}
	})
}

// TestReconcileResultAddCountsEveryField: Add sums every count of a
// result, so a pass that applies two answers reports both; a field added
// to ReconcileResult without a line in Add fails here.
func TestReconcileResultAddCountsEveryField(t *testing.T) {
	t.Parallel()
	var one mailstore.ReconcileResult
	v := reflect.ValueOf(&one).Elem()
	for i := range v.NumField() {
		if f := v.Field(i); f.Kind() == reflect.Int {
			f.SetInt(int64(i + 1))
		}
	}
	one.Withheld = []mailstore.WithheldChange{{Kind: mailstore.MutationRelocate}}
	sum := one
	sum.Withheld = slices.Clone(one.Withheld)
	sum.Add(one)
	s := reflect.ValueOf(sum)
	for i := range v.NumField() {
		if v.Field(i).Kind() == reflect.Int {
			require.Equal(t, 2*v.Field(i).Int(), s.Field(i).Int(), v.Type().Field(i).Name)
		}
	}
	require.Len(t, sum.Withheld, 2)
}
