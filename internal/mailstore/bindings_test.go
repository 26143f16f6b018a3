package mailstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"
	"golang.org/x/sync/errgroup"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

func TestEnsureAccount(t *testing.T) {
	t.Parallel()

	type testBundle struct{ pool *pgxpool.Pool }
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		return testContext(t), &testBundle{pool: dbtest.Pool(t)}
	}

	t.Run("CreatesOnceAndReturnsTheSameID", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		first, err := mailstore.EnsureAccount(ctx, b.pool, "alice@example.org")
		require.NoError(t, err)
		again, err := mailstore.EnsureAccount(ctx, b.pool, "alice@example.org")
		require.NoError(t, err)
		require.Equal(t, first, again)
		other, err := mailstore.EnsureAccount(ctx, b.pool, "bob@example.org")
		require.NoError(t, err)
		require.NotEqual(t, first, other)
	})

	t.Run("BlankKeyRejected", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, err := mailstore.EnsureAccount(ctx, b.pool, "  ")
		require.Error(t, err)
		require.False(t, mailstore.IsConcurrencyConflict(err))
	})

	t.Run("ConcurrentCreationIsNotAFailure", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		tx1 := begin(ctx, t, b.pool)
		id1, err := mailstore.EnsureAccount(ctx, tx1, "a")
		require.NoError(t, err)

		// The second run's insert waits for the first transaction.
		tx2 := begin(ctx, t, b.pool)
		done := make(chan struct{})
		var id2 int64
		var err2 error
		go func() {
			defer close(done)
			id2, err2 = mailstore.EnsureAccount(ctx, tx2, "a")
		}()
		requireBlocked(ctx, t, b.pool, tx1, tx2, done)
		require.NoError(t, tx1.Commit(ctx))
		<-done
		require.NoError(t, err2)
		require.Equal(t, id1, id2)
		require.NoError(t, tx2.Commit(ctx))
	})
}

// requireBlocked waits until PostgreSQL reports waiter's statement as
// blocked by holder's transaction (pg_blocking_pids), and fails if the
// operation behind done ends first: it did not wait for the other
// transaction.
func requireBlocked(ctx context.Context, t *testing.T, pool *pgxpool.Pool, holder, waiter pgx.Tx, done <-chan struct{}) {
	t.Helper()
	holderPID, waiterPID := int32(holder.Conn().PgConn().PID()), int32(waiter.Conn().PgConn().PID())
	for {
		var blocked bool
		require.NoError(t, pool.QueryRow(ctx, `SELECT $1::int4 = ANY(pg_blocking_pids($2::int4))`, holderPID, waiterPID).Scan(&blocked))
		if blocked {
			return
		}
		select {
		case <-done:
			t.Fatal("the operation did not wait for the other transaction")
		case <-ctx.Done():
			t.Fatalf("the operation never waited on the other transaction: %v", ctx.Err())
		case <-time.After(5 * time.Millisecond):
		}
	}
}

type mappingChange struct {
	Generation   int
	PreviousPath *string
	Path         string
}

func mappingChanges(ctx context.Context, t *testing.T, q mailstore.Querier, accountID int64, alias string) []mappingChange {
	t.Helper()
	rows, err := q.Query(ctx,
		`SELECT generation, previous_remote_path, remote_path FROM mail_folder_mapping_changes
		 WHERE mailbox_account_id = $1 AND alias = $2 ORDER BY id`, accountID, alias)
	require.NoError(t, err)
	changes, err := pgx.CollectRows(rows, pgx.RowToStructByPos[mappingChange])
	require.NoError(t, err)
	return changes
}

func ptr[T any](v T) *T { return &v }

func TestCommitBinding(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool      *pgxpool.Pool
		accountID int64
	}
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx := testContext(t)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "a")
		require.NoError(t, err)
		return ctx, &testBundle{pool: pool, accountID: accountID}
	}
	// commit commits one binding in its own transaction.
	commit := func(ctx context.Context, t *testing.T, b *testBundle, alias, path, delim string) (mailstore.Binding, mailstore.BindingChange, *mailstore.Binding) {
		t.Helper()
		tx := begin(ctx, t, b.pool)
		bound, change, prev, err := mailstore.CommitBinding(ctx, tx, b.accountID, alias, path, delim)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return bound, change, prev
	}

	t.Run("NeverBound", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, found, err := mailstore.LatestBinding(ctx, b.pool, b.accountID, "INBOX")
		require.NoError(t, err)
		require.False(t, found)
	})

	t.Run("LatestOfSeveralInOneRead", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		inbox, _, _ := commit(ctx, t, b, "INBOX", "INBOX", "/")
		commit(ctx, t, b, "SENT", "Sent", "/")
		sent, _, _ := commit(ctx, t, b, "SENT", "Sent Items", "/")
		got, err := mailstore.LatestBindings(ctx, b.pool, b.accountID, []string{"INBOX", "SENT", "ARCHIVE"})
		require.NoError(t, err)
		require.Equal(t, map[string]mailstore.Binding{"INBOX": inbox, "SENT": sent}, got, "the latest generation of each alias bound, none for one never bound")
	})

	t.Run("FirstBinding", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		bound, change, prev := commit(ctx, t, b, "INBOX", "INBOX", "/")
		require.Equal(t, mailstore.BindingFirst, change)
		require.Nil(t, prev)
		require.NotZero(t, bound.ID)
		require.Equal(t, mailstore.Binding{ID: bound.ID, AccountID: b.accountID, Alias: "INBOX", Generation: 1, RemotePath: "INBOX", Delimiter: "/"}, bound)

		latest, found, err := mailstore.LatestBinding(ctx, b.pool, b.accountID, "INBOX")
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, bound, latest)
		require.Equal(t, []mappingChange{{Generation: 1, Path: "INBOX"}}, mappingChanges(ctx, t, b.pool, b.accountID, "INBOX"))
	})

	t.Run("SamePathUnchanged", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		first, _, _ := commit(ctx, t, b, "INBOX", "INBOX", "/")
		again, change, prev := commit(ctx, t, b, "INBOX", "INBOX", "/")
		require.Equal(t, mailstore.BindingUnchanged, change)
		require.Nil(t, prev)
		require.Equal(t, first, again)
		require.Len(t, mappingChanges(ctx, t, b.pool, b.accountID, "INBOX"), 1, "no audit record for an unchanged binding")
	})

	t.Run("DelimiterChangeUpdatesInPlace", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		first, _, _ := commit(ctx, t, b, "ARCHIVE", "Archive", "/")
		again, change, _ := commit(ctx, t, b, "ARCHIVE", "Archive", ".")
		require.Equal(t, mailstore.BindingUnchanged, change)
		require.Equal(t, first.ID, again.ID)
		require.Equal(t, ".", again.Delimiter)
		none, _, _ := commit(ctx, t, b, "ARCHIVE", "Archive", "")
		require.Equal(t, "", none.Delimiter)

		latest, _, err := mailstore.LatestBinding(ctx, b.pool, b.accountID, "ARCHIVE")
		require.NoError(t, err)
		require.Equal(t, first.ID, latest.ID)
		require.Equal(t, "", latest.Delimiter)
		var isNull bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT hierarchy_delimiter IS NULL FROM mail_folders WHERE id = $1`, latest.ID).Scan(&isNull))
		require.True(t, isNull, "no delimiter is stored as NULL")
	})

	t.Run("RepointCommitsNextGeneration", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		first, _, _ := commit(ctx, t, b, "SENT", "Sent", "/")
		second, change, prev := commit(ctx, t, b, "SENT", "Sent Items", "/")
		require.Equal(t, mailstore.BindingRepointed, change)
		require.Equal(t, &first, prev)
		require.Equal(t, 2, second.Generation)
		require.NotEqual(t, first.ID, second.ID)
		require.Equal(t, "Sent Items", second.RemotePath)

		// Back to the first path is a third generation, not the first.
		third, change, prev := commit(ctx, t, b, "SENT", "Sent", "/")
		require.Equal(t, mailstore.BindingRepointed, change)
		require.Equal(t, &second, prev)
		require.Equal(t, 3, third.Generation)
		require.NotEqual(t, first.ID, third.ID)

		require.Equal(t, []mappingChange{
			{Generation: 1, Path: "Sent"},
			{Generation: 2, PreviousPath: ptr("Sent"), Path: "Sent Items"},
			{Generation: 3, PreviousPath: ptr("Sent Items"), Path: "Sent"},
		}, mappingChanges(ctx, t, b.pool, b.accountID, "SENT"))
	})

	t.Run("PathsCompareByteForByte", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		first, _, _ := commit(ctx, t, b, "SPACED", " Spaced ", "/")
		require.Equal(t, " Spaced ", first.RemotePath, "surrounding spaces are kept")
		again, change, _ := commit(ctx, t, b, "SPACED", " Spaced ", "/")
		require.Equal(t, mailstore.BindingUnchanged, change)
		require.Equal(t, first.ID, again.ID)
		trimmed, change, _ := commit(ctx, t, b, "SPACED", "Spaced", "/")
		require.Equal(t, mailstore.BindingRepointed, change)
		require.Equal(t, 2, trimmed.Generation)
		recased, change, _ := commit(ctx, t, b, "SPACED", "spaced", "/")
		require.Equal(t, mailstore.BindingRepointed, change)
		require.Equal(t, 3, recased.Generation)
	})

	t.Run("AliasesAndAccountsIndependent", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		inbox, _, _ := commit(ctx, t, b, "INBOX", "INBOX", "/")
		sent, change, _ := commit(ctx, t, b, "SENT", "INBOX", "/")
		require.Equal(t, mailstore.BindingFirst, change, "another alias on the same path is its own binding")
		require.NotEqual(t, inbox.ID, sent.ID)

		otherAccount, err := mailstore.EnsureAccount(ctx, b.pool, "b")
		require.NoError(t, err)
		tx := begin(ctx, t, b.pool)
		other, change, _, err := mailstore.CommitBinding(ctx, tx, otherAccount, "INBOX", "INBOX", "/")
		require.NoError(t, err)
		require.Equal(t, mailstore.BindingFirst, change)
		require.Equal(t, 1, other.Generation)
		require.NotEqual(t, inbox.ID, other.ID)
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		tx := begin(ctx, t, b.pool)
		_, _, _, err := mailstore.CommitBinding(ctx, tx, b.accountID, " ", "INBOX", "/")
		require.Error(t, err)
		_, _, _, err = mailstore.CommitBinding(ctx, tx, b.accountID, "INBOX", "", "/")
		require.Error(t, err)
	})

	t.Run("ConcurrentSamePathAdopted", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		tx1 := begin(ctx, t, b.pool)
		won, change, _, err := mailstore.CommitBinding(ctx, tx1, b.accountID, "INBOX", "INBOX", "/")
		require.NoError(t, err)
		require.Equal(t, mailstore.BindingFirst, change)

		tx2 := begin(ctx, t, b.pool)
		done := make(chan struct{})
		var (
			adopted mailstore.Binding
			change2 mailstore.BindingChange
			prev2   *mailstore.Binding
			err2    error
		)
		go func() {
			defer close(done)
			adopted, change2, prev2, err2 = mailstore.CommitBinding(ctx, tx2, b.accountID, "INBOX", "INBOX", "/")
		}()
		requireBlocked(ctx, t, b.pool, tx1, tx2, done)
		require.NoError(t, tx1.Commit(ctx))
		<-done
		require.NoError(t, err2)
		require.Equal(t, mailstore.BindingUnchanged, change2)
		require.Nil(t, prev2)
		require.Equal(t, won, adopted)
		// The lost race did not abort the transaction.
		require.NoError(t, tx2.Commit(ctx))
		require.Len(t, mappingChanges(ctx, t, b.pool, b.accountID, "INBOX"), 1)
	})

	t.Run("ConcurrentDifferentPathRefused", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		commit(ctx, t, b, "ARCHIVE", "Archive", "/")

		tx1 := begin(ctx, t, b.pool)
		won, change, _, err := mailstore.CommitBinding(ctx, tx1, b.accountID, "ARCHIVE", "Archive/2024", "/")
		require.NoError(t, err)
		require.Equal(t, mailstore.BindingRepointed, change)

		tx2 := begin(ctx, t, b.pool)
		done := make(chan struct{})
		var err2 error
		go func() {
			defer close(done)
			_, _, _, err2 = mailstore.CommitBinding(ctx, tx2, b.accountID, "ARCHIVE", "Old Archive", "/")
		}()
		requireBlocked(ctx, t, b.pool, tx1, tx2, done)
		require.NoError(t, tx1.Commit(ctx))
		<-done
		require.ErrorIs(t, err2, mailstore.ErrConcurrencyConflict)
		require.True(t, mailstore.IsConcurrencyConflict(err2))
		require.Contains(t, err2.Error(), "ARCHIVE")
		require.NotContains(t, err2.Error(), "Archive/2024", "no remote path in an error")
		require.NotContains(t, err2.Error(), "Old Archive")
		// The transaction is still usable.
		var one int
		require.NoError(t, tx2.QueryRow(ctx, "SELECT 1").Scan(&one))
		require.NoError(t, tx2.Rollback(ctx))

		latest, _, err := mailstore.LatestBinding(ctx, b.pool, b.accountID, "ARCHIVE")
		require.NoError(t, err)
		require.Equal(t, won, latest)
		require.Len(t, mappingChanges(ctx, t, b.pool, b.accountID, "ARCHIVE"), 2)
	})

	t.Run("ConcurrentRollbackLetsTheOtherCommit", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		tx1 := begin(ctx, t, b.pool)
		_, _, _, err := mailstore.CommitBinding(ctx, tx1, b.accountID, "INBOX", "INBOX", "/")
		require.NoError(t, err)

		tx2 := begin(ctx, t, b.pool)
		done := make(chan struct{})
		var (
			bound   mailstore.Binding
			change2 mailstore.BindingChange
			err2    error
		)
		go func() {
			defer close(done)
			bound, change2, _, err2 = mailstore.CommitBinding(ctx, tx2, b.accountID, "INBOX", "Inbox", "/")
		}()
		requireBlocked(ctx, t, b.pool, tx1, tx2, done)
		require.NoError(t, tx1.Rollback(ctx))
		<-done
		require.NoError(t, err2)
		require.Equal(t, mailstore.BindingFirst, change2)
		require.Equal(t, 1, bound.Generation)
		require.NoError(t, tx2.Commit(ctx))
		require.Equal(t, []mappingChange{{Generation: 1, Path: "Inbox"}}, mappingChanges(ctx, t, b.pool, b.accountID, "INBOX"))
	})
}

// TestFirstBindingRace is two or more runs of an account nothing has stored
// yet binding the same alias at once, through RetryConflicts as the
// synchronizer does: every run ends with the same binding, one generation
// and one audit record.
func TestFirstBindingRace(t *testing.T) {
	t.Parallel()

	type testBundle struct{ pool *pgxpool.Pool }
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		return testContext(t), &testBundle{pool: dbtest.Pool(t)}
	}

	t.Run("SamePath", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		const runs = 8
		var (
			mu    sync.Mutex
			bound = map[int64]int{}
			start = make(chan struct{})
			g     errgroup.Group
		)
		for range runs {
			g.Go(func() error {
				<-start
				return mailstore.RetryConflicts(ctx, b.pool, 3, func(ctx context.Context, tx pgx.Tx) error {
					accountID, err := mailstore.EnsureAccount(ctx, tx, "fresh")
					if err != nil {
						return err
					}
					binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
					if err != nil {
						return err
					}
					mu.Lock()
					bound[binding.ID]++
					mu.Unlock()
					return nil
				})
			})
		}
		close(start)
		require.NoError(t, g.Wait())
		require.Len(t, bound, 1, "every run ends with the same binding")

		var folders, changes int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM mail_folders`).Scan(&folders))
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM mail_folder_mapping_changes`).Scan(&changes))
		require.Equal(t, 1, folders)
		require.Equal(t, 1, changes)
	})

	t.Run("DifferentPathsNeverShareAGeneration", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		paths := []string{"A", "B", "C", "D", "E", "F"}
		var (
			start = make(chan struct{})
			g     errgroup.Group
		)
		for _, path := range paths {
			g.Go(func() error {
				<-start
				err := mailstore.RetryConflicts(ctx, b.pool, 10, func(ctx context.Context, tx pgx.Tx) error {
					accountID, err := mailstore.EnsureAccount(ctx, tx, "fresh")
					if err != nil {
						return err
					}
					_, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "INBOX", path, "/")
					return err
				})
				if mailstore.IsConcurrencyConflict(err) {
					return nil // a deferral, not a failure
				}
				return err
			})
		}
		close(start)
		require.NoError(t, g.Wait())

		// Generations are dense from 1, each names one path, and each has
		// exactly one audit record naming the same path.
		rows, err := b.pool.Query(ctx,
			`SELECT f.generation, f.remote_path, count(c.id)
			 FROM mail_folders f
			 LEFT JOIN mail_folder_mapping_changes c
			   ON c.mailbox_account_id = f.mailbox_account_id AND c.alias = f.alias
			  AND c.generation = f.generation AND c.remote_path = f.remote_path
			 GROUP BY f.generation, f.remote_path ORDER BY f.generation`)
		require.NoError(t, err)
		type row struct {
			Generation int
			Path       string
			Audits     int
		}
		got, err := pgx.CollectRows(rows, pgx.RowToStructByPos[row])
		require.NoError(t, err)
		require.NotEmpty(t, got)
		for i, r := range got {
			require.Equal(t, i+1, r.Generation)
			require.Equal(t, 1, r.Audits)
		}
	})
}
