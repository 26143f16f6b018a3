package database

import (
	"errors"
	"strings"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailfathom/mailfathom/internal/resilience"
)

// SQLSTATEs the database family repeats: serialization failure and
// deadlock, which PostgreSQL reports for a transaction it rolled back so
// that it can be run again.
const (
	sqlstateSerializationFailure = "40001"
	sqlstateDeadlockDetected     = "40P01"
)

// Classifier is the Database family's failure classifier: pgx's own
// verdicts, no second SQLSTATE table. Transient: pgconn.SafeToRetry
// (nothing reached the server), pgconn.Timeout, a failure to connect
// (*pgconn.ConnectError, unless the server answered it with an
// authorization refusal, SQLSTATE class 28, which is a rejected credential
// rather than a connection failure), a serialization failure (40001) or
// deadlock (40P01), and an abandoned attempt.
//
// Everything else is terminal. A failure that declares itself a lost
// optimistic-concurrency race (a ConcurrencyConflict() bool method
// answering true) is terminal whatever it wraps: the store retries it
// itself (mailstore.RetryConflicts), and the pipeline must not become a
// second layer around the same rows.
var Classifier resilience.Classifier = resilience.ClassifierFunc(Transient)

// Transient reports the Database family's verdict on err (see Classifier).
func Transient(err error) bool {
	var conflict interface{ ConcurrencyConflict() bool }
	if err == nil || resilience.BudgetSpent(err) || (errors.As(err, &conflict) && conflict.ConcurrencyConflict()) {
		return false
	}
	if errors.Is(err, resilience.ErrAttemptTimeout) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	pgErr, isPgErr := errors.AsType[*pgconn.PgError](err)
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return !isPgErr || len(pgErr.Code) < 2 || pgErr.Code[:2] != "28"
	}
	return isPgErr && (pgErr.Code == sqlstateSerializationFailure || pgErr.Code == sqlstateDeadlockDetected)
}

// RolledBackToRunAgain reports a transaction PostgreSQL rolled back so that
// it can be run again: a serialization failure (40001) or a deadlock
// (40P01). Nothing of the transaction was kept, so running it again from
// its start is safe; it says nothing about connection failures, which may
// have committed.
func RolledBackToRunAgain(err error) bool {
	pgErr, ok := errors.AsType[*pgconn.PgError](err)
	return ok && (pgErr.Code == sqlstateSerializationFailure || pgErr.Code == sqlstateDeadlockDetected)
}

// ConnectionLost reports a failure that says the database connection went
// away under the caller, decided from where the failure came from — pgx's
// own connection and pool errors — never from its shape alone: the server
// shutting down (SQLSTATE 57P01–57P03), a connection exception (class 08),
// too many connections (53300), a connection pgx closed, a failure to
// connect, or a pgconn failure to send or receive. A network error that
// did not come through pgx (a mail server's, say) is not one.
//
// A statement that failed this way may have reached the server, so the
// pipeline does not repeat it within an operation; a job that is
// idempotent on what it writes is worth attempting again once the
// database is back.
func ConnectionLost(err error) bool {
	if err == nil {
		return false
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		code := pgErr.Code
		return strings.HasPrefix(code, "08") || code == "57P01" || code == "57P02" || code == "57P03" || code == "53300"
	}
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return true
	}
	// Every failure pgconn reports about its connection — sending,
	// receiving, a lock on a busy connection, a timeout — declares whether
	// it is safe to retry; nothing outside pgx does.
	var fromPgconn interface{ SafeToRetry() bool }
	return errors.Is(err, pgconn.ErrConnClosed) || errors.As(err, &fromPgconn)
}
