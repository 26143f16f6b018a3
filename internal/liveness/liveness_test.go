package liveness_test

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// carriedBy is the metadata key naming a carried job's carrier.
const carriedBy = "carried_by"

func TestSweep(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool *pgxpool.Pool
	}

	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		return ctx, &testBundle{pool: dbtest.Pool(t)}
	}

	// runningJob inserts a job River would show as running, started ago.
	runningJob := func(ctx context.Context, t *testing.T, b *testBundle, kind string, ago time.Duration) int64 {
		t.Helper()
		var id int64
		require.NoError(t, b.pool.QueryRow(ctx, `
			INSERT INTO river_job (kind, args, queue, state, attempt, max_attempts, attempted_at, priority, scheduled_at)
			VALUES ($1, '{}', 'folders', 'running', 1, 10, now() - make_interval(secs => $2), 1, now())
			RETURNING id`, kind, ago.Seconds()).Scan(&id))
		return id
	}

	state := func(ctx context.Context, t *testing.T, b *testBundle, id int64) string {
		t.Helper()
		var s string
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT state::text FROM river_job WHERE id = $1", id).Scan(&s))
		return s
	}

	t.Run("RequeuesOnlyJobsNobodyHolds", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)

		orphan := runningJob(ctx, t, b, "folder_pass", time.Minute)
		alive := runningJob(ctx, t, b, "folder_pass", time.Minute)
		young := runningJob(ctx, t, b, "folder_pass", 0)
		otherKind := runningJob(ctx, t, b, "something_else", time.Minute)

		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		require.NoError(t, liveness.Hold(ctx, conn, alive))

		ids, err := liveness.Sweep(ctx, b.pool, []string{"folder_pass"}, carriedBy, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, []int64{orphan}, ids)
		require.Equal(t, "available", state(ctx, t, b, orphan))
		require.Equal(t, "running", state(ctx, t, b, alive))
		require.Equal(t, "running", state(ctx, t, b, young))
		require.Equal(t, "running", state(ctx, t, b, otherKind))

		var reason string
		require.NoError(t, b.pool.QueryRow(ctx, "SELECT errors[array_length(errors, 1)]->>'error' FROM river_job WHERE id = $1", orphan).Scan(&reason))
		require.Contains(t, reason, "liveness lock")

		// The lock dies with its holder's connection.
		require.NoError(t, liveness.Release(ctx, conn, alive))
		ids, err = liveness.Sweep(ctx, b.pool, []string{"folder_pass"}, carriedBy, 20*time.Second)
		require.NoError(t, err)
		require.Equal(t, []int64{alive}, ids)
	})

	t.Run("ALiveProcessCoversItsJobsBeforeTheyTakeTheirOwnLock", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		fetched := runningJob(ctx, t, b, "folder_pass", time.Minute)
		dead := runningJob(ctx, t, b, "folder_pass", time.Minute)
		_, err := b.pool.Exec(ctx, `UPDATE river_job SET attempted_by = ARRAY['host-1-live'] WHERE id = $1`, fetched)
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `UPDATE river_job SET attempted_by = ARRAY['host-1-live', 'host-2-dead'] WHERE id = $1`, dead)
		require.NoError(t, err)

		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		require.NoError(t, liveness.HoldProcess(ctx, conn, "host-1-live"))

		ids, err := liveness.Sweep(ctx, b.pool, []string{"folder_pass"}, carriedBy, 0)
		require.NoError(t, err)
		require.Equal(t, []int64{dead}, ids, "only the job whose last process is gone")
	})

	t.Run("ReleasesWhatADeadCarrierCarried", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		carrier := runningJob(ctx, t, b, "account_run", time.Minute)
		gone := runningJob(ctx, t, b, "account_run", time.Minute)
		// carried inserts a job carried by carrier, inserted ago.
		carried := func(carrier int64, ago time.Duration) int64 {
			var id int64
			require.NoError(t, b.pool.QueryRow(ctx, `
				INSERT INTO river_job (kind, args, queue, state, max_attempts, priority, scheduled_at, created_at, metadata)
				VALUES ('folder_pass', '{}', 'folders', 'pending', 10, 1, now(), now() - make_interval(secs => $2),
				        jsonb_build_object('carried_by', $1::bigint))
				RETURNING id`, carrier, ago.Seconds()).Scan(&id))
			return id
		}
		held := carried(carrier, time.Minute)
		young := carried(gone, 0)
		abandoned := carried(gone, time.Minute)
		orphanedByDeletion := carried(1<<40, time.Minute)
		// A carrier whose connection died with its lock while its process
		// lives on can neither complete nor hand back what it carried.
		lostConnection := runningJob(ctx, t, b, "account_run", time.Minute)
		_, err := b.pool.Exec(ctx, `UPDATE river_job SET attempted_by = ARRAY['host-live'] WHERE id = $1`, lostConnection)
		require.NoError(t, err)
		stranded := carried(lostConnection, time.Minute)
		_, err = b.pool.Exec(ctx, `INSERT INTO river_job (kind, args, queue, state, max_attempts, priority, scheduled_at)
			VALUES ('folder_pass', '{}', 'folders', 'pending', 10, 1, now())`)
		require.NoError(t, err, "a pending job nobody carries")

		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		require.NoError(t, liveness.HoldProcess(ctx, conn, "host-live"))
		require.NoError(t, liveness.Hold(ctx, conn, carrier))
		require.NoError(t, liveness.Hold(ctx, conn, gone))
		require.NoError(t, liveness.Release(ctx, conn, gone))

		ids, err := liveness.Sweep(ctx, b.pool, []string{"folder_pass"}, carriedBy, 20*time.Second)
		require.NoError(t, err)
		require.ElementsMatch(t, []int64{abandoned, orphanedByDeletion, stranded}, ids)
		require.Equal(t, "pending", state(ctx, t, b, held), "its carrier holds its lock")
		require.Equal(t, "pending", state(ctx, t, b, young))
		require.Equal(t, "available", state(ctx, t, b, abandoned))
		require.Equal(t, "running", state(ctx, t, b, gone), "a carrier of another kind is not swept")
	})
}

func TestMaintenanceLeadership(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	logger := slog.New(slog.DiscardHandler)

	first, err := liveness.TakeProcessLock(ctx, pool, "host-1", logger)
	require.NoError(t, err)
	second, err := liveness.TakeProcessLock(ctx, pool, "host-2", logger)
	require.NoError(t, err)
	t.Cleanup(second.Close)
	require.True(t, first.Leading(), "the first process to take its lock leads")
	require.False(t, second.Leading(), "one leader at a time")

	second.Keep(20 * time.Millisecond)
	first.Close()
	require.False(t, first.Leading())
	poll.UntilTrue(t, 10*time.Second, "the next process takes the leadership at its next check once the leader's session ends",
		second.Leading)

	third, err := liveness.TakeProcessLock(ctx, pool, "host-3", logger)
	require.NoError(t, err)
	t.Cleanup(third.Close)
	require.False(t, third.Leading())
}
