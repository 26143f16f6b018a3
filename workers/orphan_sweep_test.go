package workers_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/workers"
)

// TestSweepOrphansCoversEveryKind: a job of any kind that a process was
// running when it died — one that holds a liveness lock of its own, like
// a folder pass, or one its process's lock covers alone, like an embed job
// — is handed back by the sweep, rather than left running until River's
// stuck-job rescue an hour later.
func TestSweepOrphansCoversEveryKind(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	pool := dbtest.Pool(t)
	cfg, err := config.Load([]string{"MAILFATHOM_SYNC_ENABLED=false"})
	require.NoError(t, err)
	logs := &capture.Buffer{}
	ids := map[string]int64{}
	for _, kind := range jobs.Kinds {
		var id int64
		// On a queue no worker takes, attempted by a process that is gone.
		require.NoError(t, pool.QueryRow(ctx, `
			INSERT INTO river_job (kind, args, queue, state, attempt, max_attempts, attempted_at, attempted_by, priority, scheduled_at)
			VALUES ($1, '{}', 'nobody', 'running', 1, 10, now() - interval '1 minute', ARRAY['a-process-that-died'], 1, now())
			RETURNING id`, kind).Scan(&id))
		ids[kind] = id
	}
	deps, err := workers.NewDependencies(workers.Dependencies{Pool: pool, Config: cfg})
	require.NoError(t, err)
	require.NoError(t, workers.SweepOrphans(ctx, deps, logs.Logger()))
	for kind, id := range ids {
		var state string
		require.NoError(t, pool.QueryRow(ctx, `SELECT state::text FROM river_job WHERE id = $1`, id).Scan(&state))
		require.Equal(t, "available", state, "a %s job of a process that died", kind)
	}
}
