package jobqueue_test

import (
	"context"
	"encoding/json"
	"log/slog"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/jobs"
)

func TestCarried(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool   *pgxpool.Pool
		client *river.Client[pgx.Tx]
		worker *noteWorker
	}

	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		_, err := pool.Exec(ctx, "CREATE TABLE notes (id bigint PRIMARY KEY, body text NOT NULL)")
		require.NoError(t, err)
		worker := &noteWorker{pool: pool, seen: make(chan int64, 10)}
		workers := river.NewWorkers()
		river.AddWorker(workers, worker)
		client, err := jobqueue.NewClient(jobqueue.Config{
			Pool:         pool,
			Workers:      workers,
			QueueWorkers: map[string]int{jobs.QueueAccounts: 1},
			Logger:       slog.New(slog.DiscardHandler),
		})
		require.NoError(t, err)
		require.NoError(t, client.Start(ctx))
		t.Cleanup(func() { require.NoError(t, jobqueue.Drain(context.Background(), client, time.Second)) })
		return ctx, &testBundle{pool: pool, client: client, worker: worker}
	}

	// insert commits note id and its job, carried by carrier when not 0.
	insert := func(ctx context.Context, t *testing.T, b *testBundle, id, carrier int64) int64 {
		t.Helper()
		opts := &river.InsertOpts{Queue: jobs.QueueAccounts}
		if carrier != 0 {
			opts = jobqueue.Carried(carrier)
			opts.Queue = jobs.QueueAccounts
		}
		var job int64
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			if _, err := tx.Exec(ctx, "INSERT INTO notes (id, body) VALUES ($1, 'x')", id); err != nil {
				return err
			}
			res, err := b.client.InsertTx(ctx, tx, noteArgs{NoteID: id}, opts)
			if err == nil {
				job = res.Job.ID
			}
			return err
		}))
		return job
	}

	type row struct {
		State    string
		Attempt  int
		Metadata map[string]any
		Errors   []map[string]any
		InFuture bool
	}
	read := func(ctx context.Context, t *testing.T, b *testBundle, id int64) row {
		t.Helper()
		var (
			r        row
			metadata []byte
			errs     [][]byte
		)
		require.NoError(t, b.pool.QueryRow(ctx, `
			SELECT state::text, attempt, metadata, coalesce(errors, '{}'), scheduled_at > now() FROM river_job WHERE id = $1`, id).
			Scan(&r.State, &r.Attempt, &metadata, &errs, &r.InFuture))
		require.NoError(t, json.Unmarshal(metadata, &r.Metadata))
		for _, e := range errs {
			var m map[string]any
			require.NoError(t, json.Unmarshal(e, &m))
			r.Errors = append(r.Errors, m)
		}
		return r
	}
	ran := func(ctx context.Context, t *testing.T, b *testBundle) int64 {
		t.Helper()
		select {
		case id := <-b.worker.seen:
			return id
		case <-ctx.Done():
			t.Fatal("no job ran")
			return 0
		}
	}

	t.Run("NoWorkerFetchesACarriedJob", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		carried := insert(ctx, t, b, 1, 42)
		insert(ctx, t, b, 2, 0)
		require.Equal(t, int64(2), ran(ctx, t, b), "the job inserted after it ran, the carried one did not")
		r := read(ctx, t, b, carried)
		require.Equal(t, "pending", r.State)
		require.Equal(t, float64(42), r.Metadata[jobqueue.MetadataCarriedBy])
	})

	t.Run("CompletedByItsCarrierWithItsOutput", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		carried := insert(ctx, t, b, 1, 42)
		done, err := jobqueue.CompleteCarried(ctx, b.pool, carried, map[string]int{"stored": 3})
		require.NoError(t, err)
		require.True(t, done)
		r := read(ctx, t, b, carried)
		require.Equal(t, "completed", r.State)
		require.Equal(t, 1, r.Attempt)
		require.Equal(t, map[string]any{"stored": float64(3)}, r.Metadata["output"])
		require.Equal(t, float64(42), r.Metadata[jobqueue.MetadataCarriedBy], "River UI says who carried it")

		done, err = jobqueue.CompleteCarried(ctx, b.pool, carried, nil)
		require.NoError(t, err)
		require.False(t, done, "only a pending job is completed")
	})

	t.Run("ReleasedItRunsAsAnyJob", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		now := insert(ctx, t, b, 1, 42)
		later := insert(ctx, t, b, 2, 42)
		require.NoError(t, jobqueue.ReleaseCarried(ctx, b.pool, time.Now().Add(time.Hour), later))
		require.NoError(t, jobqueue.ReleaseCarried(ctx, b.pool, time.Now(), now))
		require.Equal(t, int64(1), ran(ctx, t, b))
		r := read(ctx, t, b, later)
		require.Equal(t, "scheduled", r.State)
		require.True(t, r.InFuture)

		done, err := jobqueue.CompleteCarried(ctx, b.pool, later, nil)
		require.NoError(t, err)
		require.False(t, done, "a released job is River's, not its carrier's")
	})

	t.Run("CancelledWithTheFailure", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		carried := insert(ctx, t, b, 1, 42)
		require.NoError(t, jobqueue.CancelCarried(ctx, b.pool, carried, "imapx: the folder was refused [MailboxFolderRefused]"))
		r := read(ctx, t, b, carried)
		require.Equal(t, "cancelled", r.State)
		require.Len(t, r.Errors, 1)
		require.Equal(t, "imapx: the folder was refused [MailboxFolderRefused]", r.Errors[0]["error"])
	})
}
