// Package mailstore is the store of the mailbox copy: accounts, alias
// bindings, occurrences with their raw MIME, checkpoints, and the
// reconciliation queue the backward pass walks. The packages that
// orchestrate a pass (forwardpass, backwardpass) hold no SQL; they call
// this package and package searchindex.
//
// Writes take the caller's Querier (usually a pgx.Tx) and join its
// transaction; none of them opens one of its own except RetryConflicts.
// Losing a race to another run is reported as ErrConcurrencyConflict, which
// RetryConflicts retries in a fresh transaction; every other failure is
// returned as it is.
//
// No error text this package builds carries mail content or a remote folder
// path. Aliases and numeric identifiers are named; paths are not, because a
// folder path can itself carry personal or organizational information.
package mailstore

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
)

// Querier is what a read or write needs: pgx.Tx, *pgxpool.Conn and
// *pgxpool.Pool all satisfy it.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// TxBeginner starts a transaction; *pgxpool.Pool satisfies it.
type TxBeginner interface {
	Begin(ctx context.Context) (pgx.Tx, error)
}

// ErrConcurrencyConflict means another run got there first: it committed the
// row this write expected to create, or moved the row this write expected
// to find. The data is not wrong; the write is retried in a fresh
// transaction or deferred to the next run.
var ErrConcurrencyConflict error = conflictSentinel{}

type conflictSentinel struct{}

func (conflictSentinel) Error() string {
	return "mailstore: concurrency conflict: another run got there first"
}

// Identity implements failure.Named.
func (conflictSentinel) Identity() string { return ConcurrencyConflictIdentity }

// ConcurrencyConflictIdentity is the identity a concurrency conflict is
// reported under.
const ConcurrencyConflictIdentity = "PersistenceConcurrencyConflict"

// ConcurrencyConflict declares the failure a lost optimistic-concurrency
// race, which RetryConflicts retries and no resilience pipeline repeats.
func (conflictSentinel) ConcurrencyConflict() bool { return true }

// ConcurrencyConflictError is an ErrConcurrencyConflict with its reason.
type ConcurrencyConflictError struct {
	Reason string
}

func (e *ConcurrencyConflictError) Error() string {
	return "mailstore: concurrency conflict: another run got there first: " + e.Reason
}

// ConcurrencyConflict declares the failure a lost optimistic-concurrency
// race (see ErrConcurrencyConflict).
func (e *ConcurrencyConflictError) ConcurrencyConflict() bool { return true }

// Identity implements failure.Named.
func (e *ConcurrencyConflictError) Identity() string { return ConcurrencyConflictIdentity }

// Is makes errors.Is(err, ErrConcurrencyConflict) true.
func (e *ConcurrencyConflictError) Is(target error) bool { return target == ErrConcurrencyConflict }

func conflict(format string, args ...any) error {
	return &ConcurrencyConflictError{Reason: fmt.Sprintf(format, args...)}
}

// The unique constraints whose violation means another run got there
// first: a concurrent first checkpoint of a folder, a concurrent binding of
// an alias's generation, and the account row that a first binding creates
// on its way (two runs of an account nothing has stored yet collide there
// before they reach the alias).
const (
	constraintCheckpointKey = "synchronization_checkpoints_pkey"
	constraintBindingKey    = "mail_folders_account_alias_generation_key"
	constraintAccountKey    = "mailbox_accounts_account_key_key"
	// constraintServerIdentity is the one holder per server identity: a
	// pass that stored a message another pass stored first meanwhile.
	constraintServerIdentity = "ux_stored_emails_server_identity"
)

// uniqueViolation is PostgreSQL's SQLSTATE for a unique violation.
const uniqueViolation = "23505"

// IsConcurrencyConflict reports whether err means another run got there
// first: an ErrConcurrencyConflict, or a unique violation of one of the
// constraints above. Every other unique violation is a failure.
func IsConcurrencyConflict(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, ErrConcurrencyConflict) {
		return true
	}
	_, ok := conflictConstraint(err)
	return ok
}

// conflictConstraint returns the name of the conflict constraint err
// violated, if it is one of them.
func conflictConstraint(err error) (string, bool) {
	var pgErr *pgconn.PgError
	if !errors.As(err, &pgErr) || pgErr.Code != uniqueViolation {
		return "", false
	}
	switch pgErr.ConstraintName {
	case constraintCheckpointKey, constraintBindingKey, constraintAccountKey, constraintServerIdentity:
		return pgErr.ConstraintName, true
	}
	return "", false
}

// IsWriteConflict reports whether a transaction's write failed because
// another transaction got in its way, so the same idempotent write is worth
// making again in a fresh transaction: a concurrency conflict
// (IsConcurrencyConflict), or PostgreSQL rolling the transaction back as a
// serialization failure (40001) or a deadlock victim (40P01).
func IsWriteConflict(err error) bool {
	if IsConcurrencyConflict(err) {
		return true
	}
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && (pgErr.Code == "40001" || pgErr.Code == "40P01")
}

// ConflictReason describes a conflict error without its PostgreSQL text.
func ConflictReason(err error) string { return conflictReason(err) }

// conflictReason describes a conflict error without its PostgreSQL text.
func conflictReason(err error) string {
	if ce, ok := errors.AsType[*ConcurrencyConflictError](err); ok {
		return ce.Reason
	}
	if name, ok := conflictConstraint(err); ok {
		return "unique constraint " + name + " already held"
	}
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "SQLSTATE " + pgErr.Code
	}
	return "conflict"
}

// Backoff between RetryConflicts attempts: full jitter over an exponential
// ceiling, retryBaseDelay doubled per attempt and capped at retryMaxDelay.
const (
	retryBaseDelay = 20 * time.Millisecond
	retryMaxDelay  = time.Second
)

// RetryConflicts runs fn in a fresh transaction, committing when it returns
// nil. When fn or the commit fails with a concurrency conflict it rolls back
// and tries again, up to attempts in all (MaximumConcurrencyCommitAttempts;
// less than 1 counts as 1), waiting a jittered, exponentially growing delay
// between attempts that ctx cancels. When the attempts are spent it returns
// a *ConcurrencyConflictError. Any other error, fn's included, is returned
// at once and unchanged.
//
// fn must be idempotent and must not repeat remote work: it is the database
// write of data the caller already holds. A checkpoint write is not
// retried; it is attempted once and a conflict defers it to the next run.
func RetryConflicts(ctx context.Context, db TxBeginner, attempts int, fn func(ctx context.Context, tx pgx.Tx) error) error {
	attempts = max(attempts, 1)
	for attempt := 1; ; attempt++ {
		err := attemptTx(ctx, db, fn)
		if err == nil || !IsConcurrencyConflict(err) {
			return err
		}
		if attempt >= attempts {
			return &ConcurrencyConflictError{Reason: fmt.Sprintf("gave up after %d attempts: %s", attempts, conflictReason(err))}
		}
		timer := time.NewTimer(retryDelay(attempt))
		select {
		case <-ctx.Done():
			timer.Stop()
			return fmt.Errorf("mailstore: waiting to retry a concurrency conflict (%s): %w", conflictReason(err), ctx.Err())
		case <-timer.C:
		}
	}
}

// attemptTx runs fn in one transaction and commits it when fn succeeds.
// Unlike pgx.BeginFunc it keeps fn's error when the rollback fails too, so a
// conflict stays recognizable.
func attemptTx(ctx context.Context, db TxBeginner, fn func(ctx context.Context, tx pgx.Tx) error) (err error) {
	tx, err := db.Begin(ctx)
	if err != nil {
		return fmt.Errorf("mailstore: begin a transaction: %w", err)
	}
	defer func() {
		if rbErr := tx.Rollback(ctx); rbErr != nil && !errors.Is(rbErr, pgx.ErrTxClosed) && err != nil {
			err = errors.Join(err, rbErr)
		}
	}()
	if err := fn(ctx, tx); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("mailstore: commit: %w", err)
	}
	return nil
}

// ConflictBackoff waits the jittered delay RetryConflicts waits after the
// given failed attempt (1-based), or until ctx ends.
func ConflictBackoff(ctx context.Context, attempt int) error {
	timer := time.NewTimer(retryDelay(attempt))
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-timer.C:
		return nil
	}
}

// retryDelay is the wait after the given failed attempt (1-based): a
// uniformly random duration up to the attempt's ceiling, at least 1ms.
func retryDelay(attempt int) time.Duration {
	ceiling := retryBaseDelay << min(attempt-1, 16)
	ceiling = min(ceiling, retryMaxDelay)
	return time.Millisecond + rand.N(ceiling)
}
