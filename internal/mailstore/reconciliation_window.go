// The reconciliation queue: the database side of the backward pass. It
// chooses the bounded window of stored mail a pass asks the server about
// and applies the server's answer — refreshed flags, confirmed existence,
// and disappearances, which the account's disposition turns into
// tombstones or erased local copies.
//
// There is no cursor. The window is the front of the folder's
// reconciliation queue (oldest flag observation first), and writing an
// observation moves a row to the back, so the pass advances by doing its
// work and an interrupted pass resumes rather than restarts or skips.

package mailstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// WindowEntry is one stored occurrence in a window.
type WindowEntry struct {
	ID  uuid.UUID
	UID uint32
	// FolderID and UIDValidity are where the occurrence was when the
	// window read it: an answer is applied to it only while it is still
	// there (a relocation's join may carry it to another folder meanwhile).
	FolderID    int64
	UIDValidity uint32
}

// ReconcileWindow is the occurrences one pass asks about.
type ReconcileWindow struct {
	Entries []WindowEntry
	// Observed and NeverObserved count the two groups.
	Observed, NeverObserved int
	// Exhausted reports that the window holds the folder's whole queue:
	// both groups came back shorter than what was asked.
	Exhausted bool
	// TakenAt is when the window was read; an occurrence observed after it
	// by another writer is left alone when the answer is applied.
	TakenAt time.Time
}

// UIDs returns the window's UIDs, ascending.
func (w ReconcileWindow) UIDs() []uint32 {
	uids := make([]uint32, len(w.Entries))
	for i, e := range w.Entries {
		uids[i] = e.UID
	}
	return uids
}

// SelectReconcileWindow reads at most size occurrences of folderID under
// uidValidity — the UIDVALIDITY the open session reports, so mail of an
// abandoned UID space falls outside every window and can never be reported
// missing — excluding tombstoned ones. Half the window is reserved for mail
// observed before, oldest observation first, and only as much of the
// reserve as there is such mail; the rest goes to never-observed mail in
// UID order. Each group is one query served by an index scan with no sort
// step (ix_stored_emails_reconciliation_queue, ix_stored_emails_never_observed),
// index-only: both carry the id.
//
// The forward pass stores the flags it fetched as an observation made at
// that fetch (Occurrence.FlagsObservedAt), so new mail joins the observed
// group at its back, behind every older observation: however much mail
// arrives, the oldest observations stay at the front, and a flood of new
// mail cannot starve old mail. New mail is asked again when the queue
// comes round to it, like any other row, and where the server reports
// modification sequences every narrowed pass asks the whole folder anyway.
// What stays never observed is what no question described in this folder:
// an occurrence a relocation of MailFathom's own carried in (its flags
// become unobserved), and mail stored before fetches were stamped. It is
// asked before any re-observation, since its stored flags may describe
// another folder, and the reserve still bounds it: a relocation of
// thousands of messages into the folder takes at most half of each window
// while old mail keeps being asked about.
func SelectReconcileWindow(ctx context.Context, q Querier, folderID int64, uidValidity uint32, size int) (ReconcileWindow, error) {
	if size < 1 {
		return ReconcileWindow{}, fmt.Errorf("mailstore: window size %d", size)
	}
	w := ReconcileWindow{TakenAt: time.Now()}
	reserve := size / 2
	observed, err := selectObserved(ctx, q, folderID, uidValidity, reserve)
	if err != nil {
		return ReconcileWindow{}, err
	}
	never, err := selectNever(ctx, q, folderID, uidValidity, size-len(observed))
	if err != nil {
		return ReconcileWindow{}, err
	}
	observedShort := len(observed) < reserve
	if !observedShort && len(never) < size-len(observed) {
		// Fewer never-observed than their share: the window's rest goes
		// back to the observed group.
		if observed, err = selectObserved(ctx, q, folderID, uidValidity, size-len(never)); err != nil {
			return ReconcileWindow{}, err
		}
		observedShort = len(observed) < size-len(never)
	}
	w.Observed, w.NeverObserved = len(observed), len(never)
	w.Entries = append(observed, never...)
	w.Exhausted = observedShort && len(never) < size-w.Observed
	return w, nil
}

// SelectNeverObserved reads at most size occurrences of folderID under
// uidValidity that no question has described in this folder — never
// observed, not tombstoned — in UID order, by the same index scan as the
// window's never-observed group. A pass narrowed by the folder's recorded
// sequence asks about them besides: nothing about them is covered by that
// sequence.
func SelectNeverObserved(ctx context.Context, q Querier, folderID int64, uidValidity uint32, size int) (ReconcileWindow, error) {
	w := ReconcileWindow{TakenAt: time.Now()}
	never, err := selectNever(ctx, q, folderID, uidValidity, size)
	if err != nil {
		return ReconcileWindow{}, err
	}
	w.Entries, w.NeverObserved = never, len(never)
	w.Exhausted = len(never) < size
	return w, nil
}

// The window's two queries, each answered by an index-only scan of one
// partial index, in index order, with no sort step.
const (
	selectObservedSQL = `
		SELECT id, uid, $1::bigint, $2::bigint FROM stored_emails
		WHERE mail_folder_id = $1 AND uid_validity = $2
		  AND remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NOT NULL
		ORDER BY remote_flags_observed_at, uid
		LIMIT $3`
	selectNeverSQL = `
		SELECT id, uid, $1::bigint, $2::bigint FROM stored_emails
		WHERE mail_folder_id = $1 AND uid_validity = $2
		  AND remote_expunge_observed_at IS NULL AND remote_flags_observed_at IS NULL
		ORDER BY uid
		LIMIT $3`
)

// ExplainReconcileWindow runs the window's two queries for folderID under
// uidValidity, each with a limit of size, under EXPLAIN (ANALYZE, BUFFERS)
// and returns their plans as PostgreSQL prints them: the observed group's,
// then the never-observed group's. It is how a benchmark or an operator
// checks that the window stays an index-only scan on a large folder; it
// reads what a window reads and writes nothing.
func ExplainReconcileWindow(ctx context.Context, q Querier, folderID int64, uidValidity uint32, size int) (observed, never string, err error) {
	explain := func(query string) (string, error) {
		rows, err := q.Query(ctx, "EXPLAIN (ANALYZE, BUFFERS) "+query, folderID, int64(uidValidity), size)
		if err != nil {
			return "", fmt.Errorf("mailstore: explain the window: %w", err)
		}
		lines, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			return "", fmt.Errorf("mailstore: explain the window: %w", err)
		}
		return strings.Join(lines, "\n"), nil
	}
	if observed, err = explain(selectObservedSQL); err != nil {
		return "", "", err
	}
	if never, err = explain(selectNeverSQL); err != nil {
		return "", "", err
	}
	return observed, never, nil
}

func selectObserved(ctx context.Context, q Querier, folderID int64, uidValidity uint32, limit int) ([]WindowEntry, error) {
	if limit <= 0 {
		return nil, nil
	}
	return collectWindow(q.Query(ctx, selectObservedSQL, folderID, int64(uidValidity), limit))
}

func selectNever(ctx context.Context, q Querier, folderID int64, uidValidity uint32, limit int) ([]WindowEntry, error) {
	if limit <= 0 {
		return nil, nil
	}
	return collectWindow(q.Query(ctx, selectNeverSQL, folderID, int64(uidValidity), limit))
}

func collectWindow(rows pgx.Rows, err error) ([]WindowEntry, error) {
	if err != nil {
		return nil, fmt.Errorf("mailstore: select window: %w", err)
	}
	entries, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (WindowEntry, error) {
		var e WindowEntry
		var uid, uidValidity int64
		err := r.Scan(&e.ID, &uid, &e.FolderID, &uidValidity)
		e.UID, e.UIDValidity = uint32(uid), uint32(uidValidity)
		return e, err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: select window: %w", err)
	}
	return entries, nil
}

// UIDRange is the closed range of UIDs First:Last, First <= Last.
type UIDRange struct{ First, Last uint32 }

// SelectOccurrencesIn returns the live occurrences of folderID under
// uidValidity whose UIDs lie in ranges, ascending by UID: the rows a
// whole-folder answer named, as the entries of a window ApplyReconciliation
// takes. ranges should be normalized (sorted, not overlapping); each is one
// range scan of ix_stored_emails_folder_uid, so a range naming UIDs that
// were never stored costs nothing beyond its probe.
func SelectOccurrencesIn(ctx context.Context, q Querier, folderID int64, uidValidity uint32, ranges []UIDRange) ([]WindowEntry, error) {
	if len(ranges) == 0 {
		return nil, nil
	}
	lo, hi := rangeBounds(ranges)
	return collectWindow(q.Query(ctx, `
		SELECT e.id, e.uid, e.mail_folder_id, e.uid_validity
		FROM unnest($3::bigint[], $4::bigint[]) AS r(lo, hi)
		JOIN stored_emails e ON e.mail_folder_id = $1 AND e.uid_validity = $2 AND e.uid BETWEEN r.lo AND r.hi
		WHERE e.remote_expunge_observed_at IS NULL
		ORDER BY e.uid`, folderID, int64(uidValidity), lo, hi))
}

// SelectOccurrencesOutside returns the live occurrences of folderID under
// uidValidity whose UIDs lie in none of ranges, ascending by UID: the
// stored mail a search of the whole folder did not find. It reads every
// live UID of the folder once (an index scan of ix_stored_emails_folder_uid
// filtered by a multirange), which is the price of a server that cannot
// report what vanished.
func SelectOccurrencesOutside(ctx context.Context, q Querier, folderID int64, uidValidity uint32, ranges []UIDRange) ([]WindowEntry, error) {
	lo, hi := rangeBounds(ranges)
	return collectWindow(q.Query(ctx, `
		WITH found AS (
			SELECT coalesce(range_agg(int8range(r.lo, r.hi, '[]')), '{}'::int8multirange) AS uids
			FROM unnest($3::bigint[], $4::bigint[]) AS r(lo, hi)
		)
		SELECT e.id, e.uid, e.mail_folder_id, e.uid_validity FROM stored_emails e, found f
		WHERE e.mail_folder_id = $1 AND e.uid_validity = $2 AND e.remote_expunge_observed_at IS NULL
		  AND NOT (e.uid <@ f.uids)
		ORDER BY e.uid`, folderID, int64(uidValidity), lo, hi))
}

func rangeBounds(ranges []UIDRange) (lo, hi []int64) {
	lo, hi = make([]int64, len(ranges)), make([]int64, len(ranges))
	for i, r := range ranges {
		lo[i], hi[i] = int64(r.First), int64(r.Last)
	}
	return lo, hi
}
