package slots_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestExclusiveLocks(t *testing.T) {
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
	conn := func(ctx context.Context, t *testing.T, b *testBundle) *pgxpool.Conn {
		t.Helper()
		c, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		t.Cleanup(c.Release)
		return c
	}

	t.Run("OneWriteConnectionPerAccount", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		first, err := slots.AcquireWriteConnection(ctx, conn(ctx, t, b), "acct")
		require.NoError(t, err)
		_, err = slots.AcquireWriteConnection(ctx, conn(ctx, t, b), "acct")
		require.ErrorIs(t, err, slots.ErrFull)
		other, err := slots.AcquireWriteConnection(ctx, conn(ctx, t, b), "other")
		require.NoError(t, err)
		require.NoError(t, other.Release(ctx))
		require.NoError(t, first.Release(ctx))
		again, err := slots.AcquireWriteConnection(ctx, conn(ctx, t, b), "acct")
		require.NoError(t, err)
		require.NoError(t, again.Release(ctx))
	})

	t.Run("OneWorkerPerMutation", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := [16]byte{1, 2, 3}
		first, err := slots.AcquireMutation(ctx, conn(ctx, t, b), id)
		require.NoError(t, err)
		_, err = slots.AcquireMutation(ctx, conn(ctx, t, b), id)
		require.ErrorIs(t, err, slots.ErrFull)
		require.NoError(t, first.Release(ctx))
		again, err := slots.AcquireMutation(ctx, conn(ctx, t, b), id)
		require.NoError(t, err)
		require.NoError(t, again.Release(ctx))
	})
}
