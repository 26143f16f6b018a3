package dbassert

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// TransactionLockAwaited reports whether a session waits for a row
// another transaction holds.
func TransactionLockAwaited(tb testing.TB, q Querier) bool {
	tb.Helper()
	return count(tb, q, "look for a session waiting on a row",
		`SELECT count(*) FROM pg_locks WHERE NOT granted AND locktype = 'transactionid'`) > 0
}

// AdvisoryLocksAwaited counts the advisory locks sessions wait for.
func AdvisoryLocksAwaited(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "count the awaited advisory locks",
		`SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted`)
}

// AdvisoryLocks counts the advisory locks held or awaited in the current
// database.
func AdvisoryLocks(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "count the advisory locks", `SELECT count(*) FROM pg_locks
		WHERE locktype = 'advisory' AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
}

// EndAdvisoryLockHolders ends the sessions holding an advisory lock in the
// current database, as a restart of PostgreSQL ends them, and returns how
// many it ended.
func EndAdvisoryLockHolders(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "end the sessions holding advisory locks", `SELECT count(*) FILTER (WHERE ended) FROM (
		SELECT pg_terminate_backend(pid) AS ended FROM pg_locks
		WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())) AS t`)
}

// AdvisoryLock is an advisory lock a session holds on a 64-bit key.
type AdvisoryLock struct {
	// PID is the holding session's server process.
	PID int32
	Key int64
}

// ReadHeldAdvisoryLocks returns the advisory locks on 64-bit keys granted
// in the current database, one consistent reading of the lock manager. It
// fails no test, so a sampler on a goroutine of its own may call it: it
// returns the error.
func ReadHeldAdvisoryLocks(ctx context.Context, q Querier) ([]AdvisoryLock, error) {
	rows, err := q.Query(ctx, `
		SELECT l.pid, (l.classid::bigint << 32) | l.objid::bigint
		FROM pg_locks l
		WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		  AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())`)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowToStructByPos[AdvisoryLock])
}

// PostponeDeadlockCheck sets, for the rest of the transaction tx, how
// long its session waits for a lock before PostgreSQL looks for a
// deadlock (deadlock_timeout, 1 s by default). PostgreSQL looks once per
// wait, in the waiting session whose time comes first, and rolls that
// session's transaction back: a test that must know which of two
// transactions in a cycle is rolled back gives the other a longer one.
func PostponeDeadlockCheck(tb testing.TB, tx pgx.Tx, d time.Duration) {
	tb.Helper()
	if _, err := tx.Exec(context.Background(), `SELECT set_config('deadlock_timeout', $1, true)`,
		strconv.FormatInt(d.Milliseconds(), 10)+"ms"); err != nil {
		tb.Fatalf("dbassert: set the deadlock timeout: %v", err)
	}
}
