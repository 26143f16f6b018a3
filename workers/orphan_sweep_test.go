package workers_test

import (
	"context"
	"testing"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
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
		ids[kind] = dbassert.InsertOrphanedJob(t, pool, kind)
	}
	deps, err := workers.NewDependencies(workers.Dependencies{Pool: pool, Config: cfg})
	require.NoError(t, err)
	require.NoError(t, workers.SweepOrphans(ctx, deps, logs.Logger()))
	for kind, id := range ids {
		job := dbassert.LastJob(t, pool, kind)
		require.Equal(t, id, job.ID)
		require.Equal(t, rivertype.JobStateAvailable, job.State, "a %s job of a process that died", kind)
	}
}
