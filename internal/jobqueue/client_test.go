package jobqueue_test

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/jobs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// noteArgs is a job that depends on a row of the test's notes table.
type noteArgs struct {
	NoteID int64 `json:"note_id"`
}

func (noteArgs) Kind() string { return "test_note" }

type noteWorker struct {
	river.WorkerDefaults[noteArgs]
	pool *pgxpool.Pool
	seen chan int64
}

// Work reads the row the job depends on: a job that ran before its row was
// committed would find nothing and fail.
func (w *noteWorker) Work(ctx context.Context, job *river.Job[noteArgs]) error {
	var body string
	if err := w.pool.QueryRow(ctx, "SELECT body FROM notes WHERE id = $1", job.Args.NoteID).Scan(&body); err != nil {
		return err
	}
	w.seen <- job.Args.NoteID
	return nil
}

type panicArgs struct{}

func (panicArgs) Kind() string { return "test_panic" }

type panicWorker struct {
	river.WorkerDefaults[panicArgs]
}

func (panicWorker) Work(context.Context, *river.Job[panicArgs]) error { panic("defect") }

func TestClient(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool   *pgxpool.Pool
		client *river.Client[pgx.Tx]
		worker *noteWorker
		reg    *prometheus.Registry
	}

	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)

		pool := dbtest.Pool(t)
		_, err := pool.Exec(ctx, "CREATE TABLE notes (id bigint PRIMARY KEY, body text NOT NULL)")
		require.NoError(t, err)

		reg := prometheus.NewRegistry()
		metrics, err := jobqueue.NewMetrics(reg)
		require.NoError(t, err)

		worker := &noteWorker{pool: pool, seen: make(chan int64, 10)}
		workers := river.NewWorkers()
		river.AddWorker(workers, worker)
		river.AddWorker(workers, &panicWorker{})

		client, err := jobqueue.NewClient(jobqueue.Config{
			Pool:         pool,
			Workers:      workers,
			QueueWorkers: map[string]int{jobs.QueueAccounts: 2},
			Logger:       slog.New(slog.DiscardHandler),
			Metrics:      metrics,
		})
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, jobqueue.Drain(context.Background(), client, time.Second)) })

		return ctx, &testBundle{pool: pool, client: client, worker: worker, reg: reg}
	}

	insertNote := func(ctx context.Context, t *testing.T, b *testBundle, tx pgx.Tx, id int64) {
		t.Helper()
		_, err := tx.Exec(ctx, "INSERT INTO notes (id, body) VALUES ($1, 'x')", id)
		require.NoError(t, err)
		_, err = b.client.InsertTx(ctx, tx, noteArgs{NoteID: id}, &river.InsertOpts{Queue: jobs.QueueAccounts})
		require.NoError(t, err)
	}

	count := func(ctx context.Context, t *testing.T, b *testBundle, query string) int {
		t.Helper()
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, query).Scan(&n))
		return n
	}

	t.Run("RollbackRemovesRowAndJob", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)

		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		insertNote(ctx, t, b, tx, 1)
		require.NoError(t, tx.Rollback(ctx))

		require.Zero(t, count(ctx, t, b, "SELECT count(*) FROM notes"))
		require.Zero(t, count(ctx, t, b, "SELECT count(*) FROM river_job WHERE kind = 'test_note'"))
		select {
		case id := <-b.worker.seen:
			t.Fatalf("a rolled-back job ran (note %d)", id)
		case <-time.After(300 * time.Millisecond):
		}
	})

	t.Run("JobRunsAfterCommit", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)

		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		insertNote(ctx, t, b, tx, 7)
		require.NoError(t, tx.Commit(ctx))

		select {
		case id := <-b.worker.seen:
			require.Equal(t, int64(7), id)
		case <-ctx.Done():
			t.Fatal("the committed job never ran")
		}
		poll.Until(t, 10*time.Second, "the job is completed", func() (bool, string) {
			n := count(ctx, t, b, "SELECT count(*) FROM river_job WHERE kind = 'test_note' AND state = 'completed'")
			return n == 1, fmt.Sprintf("%d completed", n)
		})
		require.Equal(t, 1.0, counterValue(t, b.reg, "mailfathom_job_attempts_total", map[string]string{"kind": "test_note", "outcome": "completed"}))
	})

	t.Run("PanicCancelsJob", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)

		_, err := b.client.Insert(ctx, panicArgs{}, &river.InsertOpts{Queue: jobs.QueueAccounts})
		require.NoError(t, err)
		poll.Until(t, 10*time.Second, "the panicking job is cancelled", func() (bool, string) {
			n := count(ctx, t, b, "SELECT count(*) FROM river_job WHERE kind = 'test_panic' AND state = 'cancelled'")
			return n == 1, fmt.Sprintf("%d cancelled", n)
		})
	})
}

// counterValue sums the counter samples of name whose labels include want.
func counterValue(t *testing.T, reg *prometheus.Registry, name string, want map[string]string) float64 {
	t.Helper()
	families, err := reg.Gather()
	require.NoError(t, err)
	var sum float64
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metrics:
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			for k, v := range want {
				if labels[k] != v {
					continue metrics
				}
			}
			sum += m.GetCounter().GetValue()
		}
	}
	return sum
}
