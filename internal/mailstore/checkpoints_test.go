package mailstore_test

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

func TestCheckpoints(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool   *pgxpool.Pool
		folder mailstore.Binding
	}
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx := testContext(t)
		pool := dbtest.Pool(t)
		return ctx, &testBundle{pool: pool, folder: bind(ctx, t, pool, "a", "INBOX", "INBOX")}
	}
	read := func(ctx context.Context, t *testing.T, b *testBundle) mailstore.Checkpoint {
		t.Helper()
		c, found, err := mailstore.ReadCheckpoint(ctx, b.pool, b.folder.ID)
		require.NoError(t, err)
		require.True(t, found)
		return c
	}

	t.Run("NeverSynchronized", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, found, err := mailstore.ReadCheckpoint(ctx, b.pool, b.folder.ID)
		require.NoError(t, err)
		require.False(t, found)
	})

	t.Run("FirstCheckpointRoundTrips", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		at := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
		next := mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: math.MaxUint32, LastSeenUID: math.MaxUint32, HighestModSeq: ptr(uint64(math.MaxInt64)), SynchronizedAt: at}
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, next))
		got := read(ctx, t, b)
		require.True(t, got.SynchronizedAt.Equal(at))
		got.SynchronizedAt = at
		require.Equal(t, next, got)
	})

	t.Run("ZeroTimeMeansNow", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7}))
		got := read(ctx, t, b)
		require.WithinDuration(t, time.Now(), got.SynchronizedAt, time.Minute)
		require.Nil(t, got.HighestModSeq)
		require.Zero(t, got.LastSeenUID)
	})

	t.Run("ConcurrentFirstCheckpointConflicts", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		tx := begin(ctx, t, b.pool)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 10}))
		err := mailstore.AdvanceCheckpoint(ctx, tx, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 20})
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
		// The transaction is still usable, and the first checkpoint stands.
		require.NoError(t, tx.Commit(ctx))
		require.EqualValues(t, 10, read(ctx, t, b).LastSeenUID)
	})

	t.Run("AdvanceGuardedByExpected", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 10}))
		start := read(ctx, t, b)

		next := start
		next.LastSeenUID, next.HighestModSeq, next.SynchronizedAt = 25, ptr(uint64(99)), time.Time{}
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, &start, next))
		got := read(ctx, t, b)
		require.EqualValues(t, 25, got.LastSeenUID)
		require.Equal(t, ptr(uint64(99)), got.HighestModSeq)

		// A second run that read the same starting progress lost the race.
		stale := start
		stale.LastSeenUID = 30
		err := mailstore.AdvanceCheckpoint(ctx, b.pool, &start, stale)
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
		require.EqualValues(t, 25, read(ctx, t, b).LastSeenUID)
	})

	t.Run("TimestampsAreNotCompared", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		early := time.Date(2025, 1, 1, 0, 0, 0, 123456789, time.UTC)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 10, SynchronizedAt: early}))

		// The run's copy keeps nanoseconds PostgreSQL does not; it still
		// matches.
		expected := mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 10, SynchronizedAt: early}
		later := early.Add(time.Hour)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, &expected, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 11, SynchronizedAt: later}))
		got := read(ctx, t, b)
		require.True(t, got.SynchronizedAt.Equal(later.Truncate(time.Microsecond)), got.SynchronizedAt)

		// An earlier synchronization time does not replace a later one.
		expected = got
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, &expected, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 12, SynchronizedAt: early}))
		got = read(ctx, t, b)
		require.EqualValues(t, 12, got.LastSeenUID)
		require.True(t, got.SynchronizedAt.Equal(later.Truncate(time.Microsecond)))
	})

	t.Run("NoRegressionWithinUIDValidity", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 10}))
		start := read(ctx, t, b)
		err := mailstore.AdvanceCheckpoint(ctx, b.pool, &start, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 9})
		require.ErrorIs(t, err, mailstore.ErrCheckpointRegression)
		require.False(t, mailstore.IsConcurrencyConflict(err))

		// Staying put is allowed (a run that found nothing new).
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, &start, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 10}))
	})

	t.Run("ResetToAnotherUIDValidity", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 500, HighestModSeq: ptr(uint64(1000))}))
		start := read(ctx, t, b)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, &start, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 8, LastSeenUID: 0}))
		got := read(ctx, t, b)
		require.EqualValues(t, 8, got.UIDValidity)
		require.Zero(t, got.LastSeenUID)
		require.Nil(t, got.HighestModSeq)

		// The reset is guarded like any advance.
		err := mailstore.AdvanceCheckpoint(ctx, b.pool, &start, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 9})
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
	})

	t.Run("VanishedCheckpointConflicts", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.NoError(t, mailstore.AdvanceCheckpoint(ctx, b.pool, nil, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 5}))
		start := read(ctx, t, b)
		_, err := b.pool.Exec(ctx, `DELETE FROM synchronization_checkpoints`)
		require.NoError(t, err)
		err = mailstore.AdvanceCheckpoint(ctx, b.pool, &start, mailstore.Checkpoint{FolderID: b.folder.ID, UIDValidity: 7, LastSeenUID: 6})
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
	})

	t.Run("InvalidArguments", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := b.folder.ID
		for name, tc := range map[string]struct {
			expected *mailstore.Checkpoint
			next     mailstore.Checkpoint
		}{
			"NoFolder":         {nil, mailstore.Checkpoint{UIDValidity: 1}},
			"ZeroUIDValidity":  {nil, mailstore.Checkpoint{FolderID: id}},
			"ModSeqOver63Bits": {nil, mailstore.Checkpoint{FolderID: id, UIDValidity: 1, HighestModSeq: ptr(uint64(math.MaxInt64) + 1)}},
			"OtherFolder":      {&mailstore.Checkpoint{FolderID: id + 1, UIDValidity: 1}, mailstore.Checkpoint{FolderID: id, UIDValidity: 1}},
		} {
			err := mailstore.AdvanceCheckpoint(ctx, b.pool, tc.expected, tc.next)
			require.Error(t, err, name)
			require.False(t, mailstore.IsConcurrencyConflict(err), name)
		}
		_, found, err := mailstore.ReadCheckpoint(ctx, b.pool, id)
		require.NoError(t, err)
		require.False(t, found)
	})
}
