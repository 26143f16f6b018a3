package jobqueue

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Scheduling namespaces: the first key of the transaction-scoped advisory
// lock LockScheduling takes, one per kind of job scheduled that way.
const (
	// ScheduleAccountRuns serializes scheduling an account's next run.
	ScheduleAccountRuns int32 = 0x6d05
	// ScheduleExtractionBackfill serializes scheduling the backfill.
	ScheduleExtractionBackfill int32 = 0x6d06
	// ScheduleEmbeddingBackfill serializes scheduling the embedding
	// backfill.
	ScheduleEmbeddingBackfill int32 = 0x6d07
)

// LockScheduling takes, for the rest of tx, the lock that makes "is one
// pending?" (Pending) and "insert one" a single step across every process
// sharing the database, for key within namespace.
func LockScheduling(ctx context.Context, tx pgx.Tx, namespace int32, key string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, hashtext($2))", namespace, key); err != nil {
		return fmt.Errorf("jobqueue: take the scheduling lock: %w", err)
	}
	return nil
}

// LockSchedulingShared is LockScheduling in shared mode: any number of
// transactions hold it together, and LockScheduling on the same key waits
// for all of them to end.
func LockSchedulingShared(ctx context.Context, tx pgx.Tx, namespace int32, key string) error {
	if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock_shared($1, hashtext($2))", namespace, key); err != nil {
		return fmt.Errorf("jobqueue: take the scheduling lock: %w", err)
	}
	return nil
}

// RefusedOffers keys the lock (namespace ScheduleEmbeddingBackfill) every
// transaction whose embedding offer was refused holds shared, and a walk
// of the embedding backfill that found nothing to offer takes exclusively
// before it ends: it then sees every refused offer that was in flight.
const RefusedOffers = "refused-offers"

// Pending reports whether a job of kind other than exclude (0 for none) is
// available, pending, retryable, running or scheduled. With accountKey set
// only a job whose account_id argument normalizes to it counts (trimmed and
// lower-cased, as config.AccountKey normalizes).
func Pending(ctx context.Context, tx pgx.Tx, kind, accountKey string, exclude int64) (bool, error) {
	var pending bool
	err := tx.QueryRow(ctx, `
		SELECT EXISTS (
			SELECT 1 FROM river_job
			WHERE kind = $1 AND id <> $3
			  AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
			  AND ($2 = '' OR lower(btrim(args->>'account_id')) = $2))`,
		kind, accountKey, exclude).Scan(&pending)
	if err != nil {
		return false, fmt.Errorf("jobqueue: look for a pending %s job: %w", kind, err)
	}
	return pending, nil
}

// Waiting reports whether a job of kind is waiting to run — available,
// pending, retryable or scheduled —, leaving out one that is running. A
// job that walks the database and is already running may have read it
// before what the caller writes commits: it does not stand for a walk that
// will see it.
func Waiting(ctx context.Context, tx pgx.Tx, kind string) (bool, error) {
	var waiting bool
	err := tx.QueryRow(ctx, `
		SELECT EXISTS (
			SELECT 1 FROM river_job
			WHERE kind = $1 AND state IN ('available', 'pending', 'retryable', 'scheduled'))`, kind).Scan(&waiting)
	if err != nil {
		return false, fmt.Errorf("jobqueue: look for a waiting %s job: %w", kind, err)
	}
	return waiting, nil
}

// PendingAccounts returns the normalized account_id arguments of every job
// of kind that is available, pending, retryable, running or scheduled: the
// accounts that have work of that kind coming.
func PendingAccounts(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, kind string) (map[string]bool, error) {
	rows, err := q.Query(ctx, `
		SELECT DISTINCT lower(btrim(args->>'account_id')) FROM river_job
		WHERE kind = $1 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`, kind)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: list the accounts with pending %s jobs: %w", kind, err)
	}
	keys, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return nil, fmt.Errorf("jobqueue: list the accounts with pending %s jobs: %w", kind, err)
	}
	out := make(map[string]bool, len(keys))
	for _, k := range keys {
		out[k] = true
	}
	return out, nil
}

// RescheduleAccountRun makes the account run of accountKey that is
// waiting — available, scheduled or retryable, not running — due at at,
// with no failures carried in its arguments, and reports whether there was
// one.
func RescheduleAccountRun(ctx context.Context, tx pgx.Tx, kind, accountKey string, at time.Time) (bool, error) {
	state := "scheduled"
	if !at.After(time.Now()) {
		state = "available"
	}
	tag, err := tx.Exec(ctx, `
		UPDATE river_job
		SET scheduled_at = $3, state = $4::river_job_state, args = args - 'failures_before'
		WHERE kind = $1 AND lower(btrim(args->>'account_id')) = $2
		  AND state IN ('available', 'scheduled', 'retryable')`, kind, accountKey, at, state)
	if err != nil {
		return false, fmt.Errorf("jobqueue: reschedule the account's run: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// PostponeAccountRun moves the scheduled or available account run of
// accountKey to at when it is due earlier, and reports whether it moved
// one. A run already running is left alone.
func PostponeAccountRun(ctx context.Context, q interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, kind, accountKey string, at time.Time) (bool, error) {
	tag, err := q.Exec(ctx, `
		UPDATE river_job SET scheduled_at = $3, state = 'scheduled'
		WHERE kind = $1 AND lower(btrim(args->>'account_id')) = $2
		  AND state IN ('available', 'scheduled') AND scheduled_at < $3`, kind, accountKey, at)
	if err != nil {
		return false, fmt.Errorf("jobqueue: postpone the account's run: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// AdvanceAccountRun makes the scheduled or available account run of
// accountKey due at at when it is due later, and reports whether it moved
// one. A run already running is left alone, and so is one River retries
// (its wait is the backoff of its own failure).
func AdvanceAccountRun(ctx context.Context, q interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, kind, accountKey string, at time.Time) (bool, error) {
	state := "scheduled"
	if !at.After(time.Now()) {
		state = "available"
	}
	tag, err := q.Exec(ctx, `
		UPDATE river_job SET scheduled_at = $3, state = $4::river_job_state
		WHERE kind = $1 AND lower(btrim(args->>'account_id')) = $2
		  AND state IN ('available', 'scheduled') AND scheduled_at > $3`, kind, accountKey, at, state)
	if err != nil {
		return false, fmt.Errorf("jobqueue: bring the account's run forward: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// PendingRun is an account's run that is coming or under way.
type PendingRun struct {
	// State is River's: available, scheduled, retryable, running, pending.
	State       string
	ScheduledAt time.Time
	Attempt     int
}

// PendingRuns returns, per normalized account key, the earliest job of
// kind that is coming or under way.
func PendingRuns(ctx context.Context, q interface {
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
}, kind string) (map[string]PendingRun, error) {
	rows, err := q.Query(ctx, `
		SELECT DISTINCT ON (key) key, state::text, scheduled_at, attempt
		FROM (SELECT lower(btrim(args->>'account_id')) AS key, state, scheduled_at, attempt FROM river_job
		      WHERE kind = $1 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')) j
		ORDER BY key, (state = 'running') DESC, scheduled_at`, kind)
	if err != nil {
		return nil, fmt.Errorf("jobqueue: read the pending %s jobs: %w", kind, err)
	}
	defer rows.Close()
	out := map[string]PendingRun{}
	for rows.Next() {
		var key string
		var r PendingRun
		if err := rows.Scan(&key, &r.State, &r.ScheduledAt, &r.Attempt); err != nil {
			return nil, fmt.Errorf("jobqueue: read the pending %s jobs: %w", kind, err)
		}
		out[key] = r
	}
	return out, rows.Err()
}

// MakeFolderPassDue makes the folder pass of accountKey and alias that is
// waiting — scheduled, retryable, or available from a moment still ahead
// (a short snooze), not running — available now, and
// reports whether there was one. A report from the mail server ends the
// wait early, whatever it was: the interval, or the backoff of a failing
// folder.
func MakeFolderPassDue(ctx context.Context, q interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
}, kind, accountKey, alias string) (bool, error) {
	tag, err := q.Exec(ctx, `
		UPDATE river_job SET scheduled_at = now(), state = 'available'
		WHERE kind = $1 AND lower(btrim(args->>'account_id')) = $2 AND args->>'alias' = $3
		  AND (state IN ('scheduled', 'retryable') OR (state = 'available' AND scheduled_at > now()))`, kind, accountKey, alias)
	if err != nil {
		return false, fmt.Errorf("jobqueue: make the folder's pass due: %w", err)
	}
	return tag.RowsAffected() > 0, nil
}

// AvailableJobs counts the available jobs of kind on queue, counting no
// further than limit: it reads at most about limit entries of River's
// fetching index, which is what keeps the embedding offer's backlog check
// cheap however deep the backlog.
func AvailableJobs(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, queue, kind string, limit int) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT 1 FROM river_job WHERE state = 'available' AND queue = $1 AND kind = $2 LIMIT $3) AS backlog`,
		queue, kind, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("jobqueue: count the available %s jobs: %w", kind, err)
	}
	return n, nil
}

// OutstandingJobs counts the jobs of kind that are available, pending,
// retryable, running or scheduled, counting no further than limit.
func OutstandingJobs(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, kind string, limit int) (int, error) {
	var n int
	err := q.QueryRow(ctx, `
		SELECT count(*) FROM (
			SELECT 1 FROM river_job
			WHERE kind = $1 AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')
			LIMIT $2) AS outstanding`, kind, limit).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("jobqueue: count the outstanding %s jobs: %w", kind, err)
	}
	return n, nil
}

// TryLockScheduling is LockScheduling without waiting: it reports false
// when another transaction holds the lock, which is then scheduling the
// same work.
func TryLockScheduling(ctx context.Context, tx pgx.Tx, namespace int32, key string) (bool, error) {
	var ok bool
	if err := tx.QueryRow(ctx, "SELECT pg_try_advisory_xact_lock($1, hashtext($2))", namespace, key).Scan(&ok); err != nil {
		return false, fmt.Errorf("jobqueue: try the scheduling lock: %w", err)
	}
	return ok, nil
}

// MakeDue makes every waiting (scheduled or retryable) job of kind
// available now, and reports how many it moved.
func MakeDue(ctx context.Context, tx pgx.Tx, kind string) (int64, error) {
	tag, err := tx.Exec(ctx, `
		UPDATE river_job SET state = 'available', scheduled_at = now()
		WHERE kind = $1 AND state IN ('scheduled', 'retryable')`, kind)
	if err != nil {
		return 0, fmt.Errorf("jobqueue: make the %s jobs due: %w", kind, err)
	}
	return tag.RowsAffected(), nil
}
