package dbassert

import (
	"testing"
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
