package database

import (
	"errors"

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
