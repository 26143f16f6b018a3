package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
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
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
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
		all := dbassert.Jobs(t, b.pool, "vector_index")
		var out []step
		for _, j := range all {
			generation, _ := j.Arg("generation").(float64)
			batch, _ := j.Arg("batch").(float64)
			out = append(out, step{string(j.State), int(generation), int(batch), len(all)})
		}
		return out
	}
	status := func(t *testing.T, b *testBundle) searchindex.IndexStatus {
		t.Helper()
		s, err := searchindex.ReadIndexStatus(b.ctx, b.pool, b.profile)
		require.NoError(t, err)
		return s
	}

	servesTheFirstGeneration := func(t *testing.T, b *testBundle) {
		t.Helper()
		poll.Every(t, 50*time.Millisecond, 2*time.Minute, "the first generation serves", func() bool {
			return status(t, b).Serving == 1
		}, func() string { return fmt.Sprintf("%+v; steps %v", status(t, b), steps(t, b)) })
	}

	t.Run("TheIndexIsBuiltStepByStepThenChecked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start(t, b)
		inserted, err := workers.ScheduleVectorIndex(b.ctx, b.deps, b.client)
		require.NoError(t, err)
		require.True(t, inserted)
		servesTheFirstGeneration(t, b)
		s := status(t, b)
		require.Zero(t, s.Outside)
		require.Equal(t, int64(25000), s.Passages)
		require.Equal(t, searchindex.ListsFor(25000), s.ServingLists)

		// One check that trained the generation, one step per 4 000
		// passages, and the next check, waiting out the interval.
		poll.Until(t, 10*time.Second, "the next check is scheduled", func() (bool, string) {
			all := steps(t, b)
			return all[len(all)-1].State == "scheduled", fmt.Sprintf("steps %v", all)
		})
		all := steps(t, b)
		require.Len(t, all, 1+7+1)
		require.Equal(t, step{"completed", 0, 0, 9}, all[0])
		for i, s := range all[1:8] {
			require.Equal(t, step{"completed", 1, i + 1, 9}, s)
		}
		require.Equal(t, step{"scheduled", 0, 0, 9}, all[8])
		other := 0
		for _, j := range dbassert.Jobs(t, b.pool, "vector_index") {
			var args map[string]any
			require.NoError(t, json.Unmarshal([]byte(j.Args), &args))
			for key, value := range args {
				if _, number := value.(float64); !number || !slices.Contains([]string{"profile", "generation", "batch"}, key) {
					other++
				}
			}
		}
		require.Zero(t, other, "identifiers only")

		// A check that finds nothing to do comes back as the same row.
		dbassert.MakeJobsDue(t, b.pool, "vector_index", rivertype.JobStateScheduled)
		poll.Until(t, 10*time.Second, "the check ran and is scheduled again past the interval", func() (bool, string) {
			last := dbassert.LastJob(t, b.pool, "vector_index")
			return last.AttemptedAt != nil && last.State == rivertype.JobStateScheduled && time.Until(last.ScheduledAt) > time.Minute,
				fmt.Sprintf("%s, attempted at %v, scheduled at %v", last.State, last.AttemptedAt, last.ScheduledAt)
		})
		require.Len(t, steps(t, b), 9)
	})

	t.Run("AStepCutShortIsDoneAgainFromWhatWasCommitted", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		start(t, b)
		_, err := workers.ScheduleVectorIndex(b.ctx, b.deps, b.client)
		require.NoError(t, err)
		poll.Every(t, 5*time.Millisecond, 2*time.Minute, "two steps of the first generation completed", func() bool {
			n := 0
			for _, s := range steps(t, b) {
				if s.Generation == 1 && s.State == "completed" {
					n++
				}
			}
			return n >= 2
		}, func() string { return fmt.Sprintf("steps %v", steps(t, b)) })
		// Stopped with a step under way, as a process killed midway leaves it.
		require.NoError(t, b.client.StopAndCancel(context.Background()))
		b.stop = nil
		s := status(t, b)
		require.Zero(t, (s.Passages-s.Outside)%batch, "only whole steps are committed: %d of %d moved", s.Passages-s.Outside, s.Passages)
		require.Positive(t, s.Outside)
		outstanding, err := jobqueue.OutstandingJobs(b.ctx, b.pool, "vector_index", 100)
		require.NoError(t, err)
		require.Equal(t, 1, outstanding, "the next step, committed with the last one")

		// The restarted process (its startup sweep requeues the orphan) goes
		// on where the committed steps left off.
		dbassert.MakeJobsDue(t, b.pool, "vector_index", rivertype.JobStateRunning, rivertype.JobStateRetryable, rivertype.JobStateScheduled)
		start(t, b)
		servesTheFirstGeneration(t, b)
		require.Zero(t, status(t, b).Outside)
	})
}
