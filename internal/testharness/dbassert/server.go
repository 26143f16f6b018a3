package dbassert

import (
	"context"
	"fmt"
	"testing"

	"github.com/jackc/pgx/v5"
)

// Setting returns the server's setting name as SHOW reports it.
func Setting(tb testing.TB, q Querier, name string) string {
	tb.Helper()
	var v string
	check(tb, q.QueryRow(context.Background(), `SELECT current_setting($1)`, name).Scan(&v),
		fmt.Sprintf("read the setting %s", name))
	return v
}

// CreateDatabase creates the empty database name.
func CreateDatabase(tb testing.TB, q Querier, name string) {
	tb.Helper()
	exec(tb, q, fmt.Sprintf("create the database %s", name), `CREATE DATABASE `+pgx.Identifier{name}.Sanitize())
}

// BackendPID is the process id of the server process serving q's
// connection.
func BackendPID(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "read the backend's process id", `SELECT pg_backend_pid()`)
}

// VacuumAnalyze vacuums and analyzes table, as autovacuum does once a
// table has changed enough.
func VacuumAnalyze(tb testing.TB, q Querier, table string) {
	tb.Helper()
	exec(tb, q, fmt.Sprintf("vacuum %s", table), `VACUUM (ANALYZE) `+pgx.Identifier{table}.Sanitize())
}

// ReadClientConnections counts the client sessions connected to the
// current database, but for those whose application_name is except. It
// fails no test, so a sampler on a goroutine of its own may call it: it
// returns the error.
func ReadClientConnections(ctx context.Context, q Querier, except string) (int, error) {
	var n int
	err := q.QueryRow(ctx, `SELECT count(*) FROM pg_stat_activity
		WHERE datname = current_database() AND application_name <> $1 AND backend_type = 'client backend'`, except).Scan(&n)
	return n, err
}
