package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/vectortest"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/workers"
)

func TestVectorIndexJobs(t *testing.T) {
	t.Parallel()
	const dims, batch = 32, 4000

	type testBundle struct {
		ctx     context.Context
		pool    *pgxpool.Pool
		deps    workers.Dependencies
		profile int16
		client  *river.Client[pgx.Tx]
		stop    func()
	}
	// setup stores 2 500 messages of ten passages each, embedded and in no
	// list, as before the index existed, and workers for them whose vector
	// index steps move 4 000 passages each.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		t.Cleanup(cancel)
		b := &testBundle{ctx: ctx, pool: dbtest.Pool(t)}
		gen := vectortest.NewGenerator(50, 0, dims, 3)
		b.profile = vectortest.Seed(t, ctx, b.pool, vectortest.Layout{Emails: 2500, PerEmail: 10, Seed: 3, Model: "test-model"}, gen.Passage).Profile
		provider := embedtest.Start(t, embedtest.Options{Dimensions: dims})
		cfg, err := config.Load([]string{"MAILFATHOM_EMBEDDING_PROVIDER_URL=" + provider.URL, "MAILFATHOM_EMBEDDING_MODEL=test-model",
			"MAILFATHOM_EMBEDDING_DIMENSIONS=32", "MAILFATHOM_BACKFILL_ENABLED=false"})
		require.NoError(t, err)
		pipelines, err := outbound.NewRegistry(cfg.Resilience, nil, nil)
		require.NoError(t, err)
		embedder, err := embedding.NewClient(embedding.Options{URL: provider.URL,
			Profile: embedding.Profile{Model: "test-model", Dimensions: dims}, Registry: pipelines})
		require.NoError(t, err)
		b.deps = workers.Dependencies{Pool: b.pool, Config: cfg, Resilience: pipelines, Embedder: embedder}
		workers.WithIndexBatch(&b.deps, batch)
		b.deps, err = workers.NewDependencies(b.deps)
		require.NoError(t, err)
		t.Cleanup(func() {
			if b.stop != nil {
				b.stop()
			}
		})
		return b
	}
	start := func(t *testing.T, b *testBundle) {
		t.Helper()
		ws := river.NewWorkers()
		failures, err := workers.Register(ws, b.deps)
		require.NoError(t, err)
		b.client, err = jobqueue.NewClient(jobqueue.Config{Pool: b.pool, Workers: ws,
			Middleware: []rivertype.WorkerMiddleware{failures}, QueueWorkers: map[string]int{jobs.QueueVectorIndex: 1}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		require.NoError(t, b.client.Start(ctx))
		client := b.client
		b.stop = func() {
			require.NoError(t, jobqueue.Drain(context.Background(), client, 5*time.Second))
			cancel()
			b.stop = nil
		}
	}
	type step struct {
		State                    string
		Generation, Batch, Total int
	}
	steps := func(t *testing.T, b *testBundle) []step {
		t.Helper()
		rows, err := b.pool.Query(b.ctx, `
			SELECT state, coalesce((args->>'generation')::int, 0), coalesce((args->>'batch')::int, 0),
			       (SELECT count(*) FROM river_job WHERE kind = 'vector_index')
			FROM river_job WHERE kind = 'vector_index' ORDER BY id`)
		require.NoError(t, err)
		out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[step])
		require.NoError(t, err)
		return out
	}
	status := func(t *testing.T, b *testBundle) searchindex.IndexStatus {
		t.Helper()
		s, err := searchindex.ReadIndexStatus(b.ctx, b.pool, b.profile)
		require.NoError(t, err)
		return s
	}

	t.Run("TheIndexIsBuiltStepByStepThenChecked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start(t, b)
		inserted, err := workers.ScheduleVectorIndex(b.ctx, b.deps, b.client)
		require.NoError(t, err)
		require.True(t, inserted)
		require.Eventually(t, func() bool { return status(t, b).Serving == 1 }, 2*time.Minute, 50*time.Millisecond)
		s := status(t, b)
		require.Zero(t, s.Outside)
		require.Equal(t, int64(25000), s.Passages)
		require.Equal(t, searchindex.ListsFor(25000), s.ServingLists)

		// One check that trained the generation, one step per 4 000
		// passages, and the next check, waiting out the interval.
		require.Eventually(t, func() bool {
			all := steps(t, b)
			return all[len(all)-1].State == "scheduled"
		}, 10*time.Second, 20*time.Millisecond)
		all := steps(t, b)
		require.Len(t, all, 1+7+1)
		require.Equal(t, step{"completed", 0, 0, 9}, all[0])
		for i, s := range all[1:8] {
			require.Equal(t, step{"completed", 1, i + 1, 9}, s)
		}
		require.Equal(t, step{"scheduled", 0, 0, 9}, all[8])
		var other int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM river_job, jsonb_each(args) AS a(key, value)
			WHERE kind = 'vector_index' AND (key NOT IN ('profile', 'generation', 'batch') OR jsonb_typeof(value) <> 'number')`).Scan(&other))
		require.Zero(t, other, "identifiers only")

		// A check that finds nothing to do comes back as the same row.
		_, err = b.pool.Exec(b.ctx, `UPDATE river_job SET scheduled_at = now() WHERE kind = 'vector_index' AND state = 'scheduled'`)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			var attempted bool
			require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT attempted_at IS NOT NULL AND state = 'scheduled' AND scheduled_at > now() + interval '1 minute'
				FROM river_job WHERE kind = 'vector_index' ORDER BY id DESC LIMIT 1`).Scan(&attempted))
			return attempted
		}, 10*time.Second, 20*time.Millisecond)
		require.Len(t, steps(t, b), 9)
	})

	t.Run("AStepCutShortIsDoneAgainFromWhatWasCommitted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start(t, b)
		_, err := workers.ScheduleVectorIndex(b.ctx, b.deps, b.client)
		require.NoError(t, err)
		require.Eventually(t, func() bool {
			n := 0
			for _, s := range steps(t, b) {
				if s.Generation == 1 && s.State == "completed" {
					n++
				}
			}
			return n >= 2
		}, 2*time.Minute, 5*time.Millisecond)
		// Stopped with a step under way, as a process killed midway leaves it.
		require.NoError(t, b.client.StopAndCancel(context.Background()))
		b.stop = nil
		s := status(t, b)
		require.Zero(t, (s.Passages-s.Outside)%batch, "only whole steps are committed: %d of %d moved", s.Passages-s.Outside, s.Passages)
		require.Positive(t, s.Outside)
		var outstanding int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM river_job WHERE kind = 'vector_index'
			AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled')`).Scan(&outstanding))
		require.Equal(t, 1, outstanding, "the next step, committed with the last one")

		// The restarted process (its startup sweep requeues the orphan) goes
		// on where the committed steps left off.
		_, err = b.pool.Exec(b.ctx, `UPDATE river_job SET state = 'available', scheduled_at = now()
			WHERE kind = 'vector_index' AND state IN ('running', 'retryable', 'scheduled')`)
		require.NoError(t, err)
		start(t, b)
		require.Eventually(t, func() bool { return status(t, b).Serving == 1 }, 2*time.Minute, 50*time.Millisecond)
		require.Zero(t, status(t, b).Outside)
	})
}
