// Package dbassert reads and arranges MailFathom's database for the tests
// of packages that hold no SQL of their own.
//
// A read answers one question a test asks of the store — how many jobs of
// a kind are waiting, what is stored of a folder, which passages were
// refused — where no store package exports a function that answers it.
// An arrange helper puts the database in a state the product has no
// function for, as an operator, a crash or an older version would leave
// it. Every helper fails the test when its statement does, so a test
// reads as what it checks.
//
// The reads named Read… are the exception: they take a context, fail no
// test and return the error, for a sampler on a goroutine of its own
// (which may not end the test) and for a wait or a verdict that reads
// through an outage of the database.
package dbassert

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// Querier is what the helpers read and write through, the stores'
// querier: *pgxpool.Pool, *pgxpool.Conn, *pgx.Conn and pgx.Tx all satisfy
// it.
type Querier = mailstore.Querier

// check fails tb, saying what was being done, when err is not nil.
func check(tb testing.TB, err error, doing string) {
	tb.Helper()
	if err != nil {
		tb.Fatalf("dbassert: %s: %v", doing, err)
	}
}

// count runs a statement that returns one count.
func count(tb testing.TB, q Querier, doing, sql string, args ...any) int {
	tb.Helper()
	var n int
	check(tb, q.QueryRow(context.Background(), sql, args...).Scan(&n), doing)
	return n
}

// exec runs a statement that writes.
func exec(tb testing.TB, q Querier, doing, sql string, args ...any) pgconn.CommandTag {
	tb.Helper()
	tag, err := q.Exec(context.Background(), sql, args...)
	check(tb, err, doing)
	return tag
}
