package dbassert

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// ResetStatementStatistics loads pg_stat_statements into the current
// database (the server must preload it) and forgets every statement and
// table statistic gathered so far, so what a benchmark reads next is its
// own.
func ResetStatementStatistics(tb testing.TB, q Querier) {
	tb.Helper()
	exec(tb, q, "reset the statement statistics",
		`CREATE EXTENSION IF NOT EXISTS pg_stat_statements; SELECT pg_stat_statements_reset(); SELECT pg_stat_reset()`)
}

// ResetWriteStatistics forgets the server's background writer and WAL
// statistics.
func ResetWriteStatistics(tb testing.TB, q Querier) {
	tb.Helper()
	exec(tb, q, "reset the write statistics", `SELECT pg_stat_reset_shared('bgwriter'), pg_stat_reset_shared('wal')`)
}

// WALPosition is the server's current WAL insert position.
func WALPosition(tb testing.TB, q Querier) string {
	tb.Helper()
	var lsn string
	check(tb, q.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn()::text`).Scan(&lsn), "read the WAL position")
	return lsn
}

// WALBytesSince counts the bytes of WAL written since position lsn.
func WALBytesSince(tb testing.TB, q Querier, lsn string) int64 {
	tb.Helper()
	var n int64
	check(tb, q.QueryRow(context.Background(), `SELECT pg_current_wal_insert_lsn() - $1::pg_lsn`, lsn).Scan(&n),
		"count the WAL written")
	return n
}

// WriteStatistics says, in a line, what the server's backends,
// checkpointer and background writer wrote, and its WAL's records, full
// page images, waits for full buffers, writes and syncs.
func WriteStatistics(tb testing.TB, q Querier) string {
	tb.Helper()
	var s string
	check(tb, q.QueryRow(context.Background(), `SELECT format('backends wrote %s buffers (%s fsyncs), checkpointer %s, bgwriter %s; WAL: %s records, %s FPIs, %s times WAL buffers full, %s writes, %s syncs',
			buffers_backend, buffers_backend_fsync, buffers_checkpoint, buffers_clean, wal_records, wal_fpi, wal_buffers_full, wal_write, wal_sync)
		FROM pg_stat_bgwriter, pg_stat_wal`).Scan(&s), "read the write statistics")
	return s
}

// TableSizes says, in a line, the size on disk of each of tables (with
// their indexes and TOAST), largest first.
func TableSizes(tb testing.TB, q Querier, tables ...string) string {
	tb.Helper()
	var s *string
	check(tb, q.QueryRow(context.Background(), `
		SELECT string_agg(format('%s %s', relname, pg_size_pretty(pg_total_relation_size(relid))), ', ' ORDER BY pg_total_relation_size(relid) DESC)
		FROM pg_stat_user_tables WHERE relname = ANY($1)`, tables).Scan(&s), "read the table sizes")
	if s == nil {
		return ""
	}
	return *s
}

// Autovacuums says, in a line, which tables autovacuum vacuumed or
// analyzed since the statistics were reset, and how often; "none" for
// none.
func Autovacuums(tb testing.TB, q Querier) string {
	tb.Helper()
	var s string
	check(tb, q.QueryRow(context.Background(), `
		SELECT coalesce(string_agg(format('%s vacuumed %s, analyzed %s', relname, autovacuum_count, autoanalyze_count), ', '), 'none')
		FROM pg_stat_all_tables WHERE autovacuum_count + autoanalyze_count > 0`).Scan(&s), "read the autovacuum counts")
	return s
}

// StatementTime is what pg_stat_statements gathered of one statement.
type StatementTime struct {
	Calls int64
	// Rows is how many rows its calls returned or changed.
	Rows int64
	// Milliseconds is its execution and planning time, PlanMilliseconds
	// the planning's alone.
	Milliseconds, PlanMilliseconds float64
	// WALBytes is the WAL its calls wrote.
	WALBytes float64
	// Query is its text, runs of white space made one space.
	Query string
}

// SlowestStatements returns, slowest first by execution time, at most
// limit of the current database's statements.
func SlowestStatements(tb testing.TB, q Querier, limit int) []StatementTime {
	tb.Helper()
	rows, err := q.Query(context.Background(), `
		SELECT calls, rows, total_exec_time + total_plan_time, total_plan_time, wal_bytes, regexp_replace(query, '\s+', ' ', 'g')
		FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
		ORDER BY total_exec_time DESC LIMIT $1`, limit)
	check(tb, err, "read the slowest statements")
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[StatementTime])
	check(tb, err, "read the slowest statements")
	return out
}

// FunctionTime is what the server gathered of one user function.
type FunctionTime struct {
	Name  string
	Calls int64
	// Milliseconds is the time spent in it and what it called,
	// SelfMilliseconds in it alone.
	Milliseconds, SelfMilliseconds float64
}

// SlowestFunctions returns, slowest first, at most limit of the user
// functions the server tracked (track_functions).
func SlowestFunctions(tb testing.TB, q Querier, limit int) []FunctionTime {
	tb.Helper()
	rows, err := q.Query(context.Background(), `
		SELECT funcname, calls, total_time, self_time FROM pg_stat_user_functions ORDER BY total_time DESC LIMIT $1`, limit)
	check(tb, err, fmt.Sprintf("read the %d slowest functions", limit))
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[FunctionTime])
	check(tb, err, "read the slowest functions")
	return out
}
