package slots_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestAcquire(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool *pgxpool.Pool
	}

	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx, &testBundle{pool: pgtest.Pool(t)}
	}

	// acquireAlias takes slots on a connection of its own, as a work unit
	// does; alias "" takes no alias lock, as an account run.
	acquireAlias := func(ctx context.Context, t *testing.T, b *testBundle, account, alias string, bounds slots.Bounds) (*slots.Held, error) {
		t.Helper()
		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		held, err := slots.Acquire(ctx, conn, account, alias, bounds)
		if err != nil {
			conn.Release()
			return nil, err
		}
		t.Cleanup(conn.Release)
		return held, nil
	}

	// acquire takes slots on a connection of its own, as a work unit does.
	acquire := func(ctx context.Context, t *testing.T, b *testBundle, account string, bounds slots.Bounds) (*slots.Held, error) {
		t.Helper()
		return acquireAlias(ctx, t, b, account, "", bounds)
	}

	t.Run("AccountBound", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		bounds := slots.Bounds{MaxAccounts: 2, MaxFoldersPerAccount: 1}

		a, err := acquire(ctx, t, b, "a", bounds)
		require.NoError(t, err)
		_, err = acquire(ctx, t, b, "b", bounds)
		require.NoError(t, err)
		_, err = acquire(ctx, t, b, "c", bounds)
		require.ErrorIs(t, err, slots.ErrFull)

		require.NoError(t, a.Release(ctx))
		_, err = acquire(ctx, t, b, "c", bounds)
		require.NoError(t, err)
	})

	t.Run("FoldersOfOneAccountShareItsSlot", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		bounds := slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 2}

		_, err := acquire(ctx, t, b, "a", bounds)
		require.NoError(t, err)
		_, err = acquire(ctx, t, b, "a", bounds)
		require.NoError(t, err, "a second folder of the same account shares the account slot")
		_, err = acquire(ctx, t, b, "a", bounds)
		require.ErrorIs(t, err, slots.ErrFull, "the folder bound holds")
		_, err = acquire(ctx, t, b, "b", bounds)
		require.ErrorIs(t, err, slots.ErrFull, "the account bound holds")
	})

	// A pass and a window of one alias never overlap, whatever the folder
	// bound; units of other aliases still run beside them.
	t.Run("OneUnitPerAlias", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		bounds := slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 3}

		pass, err := acquireAlias(ctx, t, b, "a", "INBOX", bounds)
		require.NoError(t, err)
		_, err = acquireAlias(ctx, t, b, "a", "INBOX", bounds)
		require.ErrorIs(t, err, slots.ErrFull, "a second unit of the same alias waits")
		other, err := acquireAlias(ctx, t, b, "a", "ARCHIVE", bounds)
		require.NoError(t, err, "another alias of the account runs beside it")
		_, err = acquireAlias(ctx, t, b, "b", "INBOX", bounds)
		require.ErrorIs(t, err, slots.ErrFull, "the account bound still holds")

		require.NoError(t, pass.Release(ctx))
		require.NoError(t, other.Release(ctx))
		_, err = acquireAlias(ctx, t, b, "a", "INBOX", bounds)
		require.NoError(t, err, "released with the unit")
		_, err = acquireAlias(ctx, t, b, "a", "", bounds)
		require.NoError(t, err, "an account run takes no alias lock")
	})

	// An account run goes on to a folder's pass within the slots it holds,
	// taking only the alias's lock.
	t.Run("AnAccountRunTakesAnAliasOnItsSlots", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		bounds := slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 2}

		run, err := acquire(ctx, t, b, "a", bounds)
		require.NoError(t, err)
		window, err := acquireAlias(ctx, t, b, "a", "ARCHIVE", bounds)
		require.NoError(t, err)
		require.ErrorIs(t, run.TakeAlias(ctx, "a", "ARCHIVE"), slots.ErrFull, "another unit works on the alias")
		require.NoError(t, run.TakeAlias(ctx, "a", "INBOX"))
		require.Error(t, run.TakeAlias(ctx, "a", "SENT"), "one alias at a time")
		_, err = acquireAlias(ctx, t, b, "a", "INBOX", bounds)
		require.ErrorIs(t, err, slots.ErrFull, "the alias is taken")

		require.NoError(t, run.DropAlias(ctx))
		require.NoError(t, window.Release(ctx))
		inbox, err := acquireAlias(ctx, t, b, "a", "INBOX", bounds)
		require.NoError(t, err, "the alias was given back, the run keeps its folder slot")
		_, err = acquireAlias(ctx, t, b, "a", "SENT", bounds)
		require.ErrorIs(t, err, slots.ErrFull, "the run and the pass hold the account's two folder slots")
		require.NoError(t, inbox.Release(ctx))
		require.NoError(t, run.TakeAlias(ctx, "a", "SENT"))
		require.NoError(t, run.Release(ctx))
		_, err = acquireAlias(ctx, t, b, "a", "SENT", bounds)
		require.NoError(t, err, "Release gives the alias back too")
	})

	t.Run("ReleasedWithTheConnection", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		bounds := slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 1}

		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		_, err = slots.Acquire(ctx, conn, "a", "", bounds)
		require.NoError(t, err)
		_, err = acquire(ctx, t, b, "b", bounds)
		require.ErrorIs(t, err, slots.ErrFull)

		// A crashed worker: its connection closes, its slots go with it.
		require.NoError(t, conn.Conn().Close(ctx))
		conn.Release()
		poll.Until(t, 5*time.Second, "the crashed worker's slot is free", func() (bool, string) {
			_, err := acquire(ctx, t, b, "b", bounds)
			return err == nil, fmt.Sprintf("acquiring: %v", err)
		})
	})
}
