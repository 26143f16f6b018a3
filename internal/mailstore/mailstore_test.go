package mailstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testContext is a context that ends with the test.
func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// begin opens a transaction that is rolled back when the test ends unless
// it was committed.
func begin(ctx context.Context, t *testing.T, pool *pgxpool.Pool) pgx.Tx {
	t.Helper()
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tx.Rollback(context.Background()) })
	return tx
}

// bind creates the account and commits a binding of alias to path.
func bind(ctx context.Context, t *testing.T, pool *pgxpool.Pool, accountKey, alias, path string) mailstore.Binding {
	t.Helper()
	var b mailstore.Binding
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		accountID, err := mailstore.EnsureAccount(ctx, tx, accountKey)
		if err != nil {
			return err
		}
		b, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, alias, path, "/")
		return err
	}))
	return b
}

func TestIsConcurrencyConflict(t *testing.T) {
	t.Parallel()

	unique := func(constraint string) error {
		return fmt.Errorf("wrapped: %w", &pgconn.PgError{Code: "23505", ConstraintName: constraint})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"Nil", nil, false},
		{"Plain", errors.New("boom"), false},
		{"Sentinel", mailstore.ErrConcurrencyConflict, true},
		{"WrappedConflictError", fmt.Errorf("x: %w", &mailstore.ConcurrencyConflictError{Reason: "r"}), true},
		{"FirstCheckpoint", unique("synchronization_checkpoints_pkey"), true},
		{"AliasGeneration", unique("mail_folders_account_alias_generation_key"), true},
		{"AccountKey", unique("mailbox_accounts_account_key_key"), true},
		{"OtherUniqueViolation", unique("stored_emails_occurrence_key"), false},
		{"StoredEmailPrimaryKey", unique("stored_emails_pkey"), false},
		{"OtherCodeSameConstraint", fmt.Errorf("w: %w", &pgconn.PgError{Code: "23503", ConstraintName: "mailbox_accounts_account_key_key"}), false},
		{"SerializationFailure", &pgconn.PgError{Code: "40001"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, mailstore.IsConcurrencyConflict(tc.err))
		})
	}

	t.Run("ConflictErrorIsSentinel", func(t *testing.T) {
		t.Parallel()
		err := fmt.Errorf("outer: %w", &mailstore.ConcurrencyConflictError{Reason: "because"})
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
		require.Contains(t, err.Error(), "because")
	})
}

func TestIsConcurrencyConflictFromDatabase(t *testing.T) {
	t.Parallel()

	type testBundle struct{ pool *pgxpool.Pool }
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		return testContext(t), &testBundle{pool: dbtest.Pool(t)}
	}

	t.Run("AccountKeyViolation", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, err := b.pool.Exec(ctx, `INSERT INTO mailbox_accounts (account_key) VALUES ('a')`)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `INSERT INTO mailbox_accounts (account_key) VALUES ('a')`)
		require.Error(t, err)
		require.True(t, mailstore.IsConcurrencyConflict(err))
	})

	t.Run("OccurrenceViolationStaysFailure", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		folder := bind(ctx, t, b.pool, "a", "INBOX", "INBOX")
		insert := `INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability)
		           VALUES (gen_random_uuid(), $1, $2, 1, 1, 'NotFetched')`
		_, err := b.pool.Exec(ctx, insert, folder.AccountID, folder.ID)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, insert, folder.AccountID, folder.ID)
		require.Error(t, err)
		require.False(t, mailstore.IsConcurrencyConflict(err))
	})
}

func TestRetryConflicts(t *testing.T) {
	t.Parallel()

	type testBundle struct{ pool *pgxpool.Pool }
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		return testContext(t), &testBundle{pool: dbtest.Pool(t)}
	}
	countAccounts := func(ctx context.Context, t *testing.T, pool *pgxpool.Pool) int {
		t.Helper()
		var n int
		require.NoError(t, pool.QueryRow(ctx, `SELECT count(*) FROM mailbox_accounts`).Scan(&n))
		return n
	}

	t.Run("CommitsOnSuccess", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		var calls atomic.Int32
		err := mailstore.RetryConflicts(ctx, b.pool, 2, func(ctx context.Context, tx pgx.Tx) error {
			calls.Add(1)
			_, err := mailstore.EnsureAccount(ctx, tx, "a")
			return err
		})
		require.NoError(t, err)
		require.EqualValues(t, 1, calls.Load())
		require.Equal(t, 1, countAccounts(ctx, t, b.pool))
	})

	t.Run("RetriesInFreshTransaction", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		var calls atomic.Int32
		err := mailstore.RetryConflicts(ctx, b.pool, 3, func(ctx context.Context, tx pgx.Tx) error {
			n := calls.Add(1)
			if _, err := mailstore.EnsureAccount(ctx, tx, fmt.Sprintf("attempt-%d", n)); err != nil {
				return err
			}
			if n == 1 {
				return fmt.Errorf("lost: %w", mailstore.ErrConcurrencyConflict)
			}
			return nil
		})
		require.NoError(t, err)
		require.EqualValues(t, 2, calls.Load())
		var keys []string
		rows, err := b.pool.Query(ctx, `SELECT account_key FROM mailbox_accounts`)
		require.NoError(t, err)
		keys, err = pgx.CollectRows(rows, pgx.RowTo[string])
		require.NoError(t, err)
		require.Equal(t, []string{"attempt-2"}, keys, "the failed attempt was rolled back")
	})

	t.Run("SpentAttemptsReturnConflictError", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, err := mailstore.EnsureAccount(ctx, b.pool, "taken")
		require.NoError(t, err)

		var calls atomic.Int32
		err = mailstore.RetryConflicts(ctx, b.pool, 3, func(ctx context.Context, tx pgx.Tx) error {
			calls.Add(1)
			// A plain insert: the account-key unique violation is one of
			// the three conflicts.
			_, err := tx.Exec(ctx, `INSERT INTO mailbox_accounts (account_key) VALUES ('taken')`)
			return err
		})
		require.EqualValues(t, 3, calls.Load())
		var ce *mailstore.ConcurrencyConflictError
		require.ErrorAs(t, err, &ce)
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
		require.Contains(t, ce.Reason, "3 attempts")
		require.Contains(t, ce.Reason, "mailbox_accounts_account_key_key")
	})

	t.Run("OtherErrorReturnedAtOnce", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		boom := errors.New("boom")
		var calls atomic.Int32
		err := mailstore.RetryConflicts(ctx, b.pool, 5, func(ctx context.Context, tx pgx.Tx) error {
			calls.Add(1)
			if _, err := mailstore.EnsureAccount(ctx, tx, "a"); err != nil {
				return err
			}
			return boom
		})
		require.ErrorIs(t, err, boom)
		require.EqualValues(t, 1, calls.Load())
		require.Equal(t, 0, countAccounts(ctx, t, b.pool), "rolled back")
	})

	t.Run("OtherUniqueViolationNotRetried", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		folder := bind(ctx, t, b.pool, "a", "INBOX", "INBOX")
		var calls atomic.Int32
		err := mailstore.RetryConflicts(ctx, b.pool, 5, func(ctx context.Context, tx pgx.Tx) error {
			calls.Add(1)
			_, err := tx.Exec(ctx,
				`INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability)
				 SELECT gen_random_uuid(), $1, $2, 1, 1, 'NotFetched' FROM generate_series(1, 2)`,
				folder.AccountID, folder.ID)
			return err
		})
		var pgErr *pgconn.PgError
		require.ErrorAs(t, err, &pgErr)
		require.Equal(t, "stored_emails_occurrence_key", pgErr.ConstraintName)
		require.EqualValues(t, 1, calls.Load())
	})

	t.Run("AttemptsBelowOneMeansOne", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		var calls atomic.Int32
		err := mailstore.RetryConflicts(ctx, b.pool, 0, func(ctx context.Context, tx pgx.Tx) error {
			calls.Add(1)
			return mailstore.ErrConcurrencyConflict
		})
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
		require.EqualValues(t, 1, calls.Load())
	})

	t.Run("CancellationEndsBackoff", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		ctx, cancel := context.WithCancel(ctx)
		var calls atomic.Int32
		start := time.Now()
		err := mailstore.RetryConflicts(ctx, b.pool, 10, func(ctx context.Context, tx pgx.Tx) error {
			if calls.Add(1) == 3 {
				cancel()
			}
			return mailstore.ErrConcurrencyConflict
		})
		require.ErrorIs(t, err, context.Canceled)
		require.EqualValues(t, 3, calls.Load())
		require.Less(t, time.Since(start), 5*time.Second)
	})
}
