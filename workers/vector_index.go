package workers

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/jobs"
)

const (
	// VectorIndexInterval is how long a check of the vector index that
	// found nothing to do waits before it looks again: the passages
	// embedded meanwhile are in their lists already (an embed job writes
	// them there), so what it finds is a rare passage left pending, or
	// mail grown into more lists.
	VectorIndexInterval = 5 * time.Minute
	// vectorIndexBatch is how many passages one step moves into a
	// generation's lists: about 30 MB of vectors read and a few seconds
	// at 384 dimensions, fifty steps for a million passages.
	vectorIndexBatch = 20_000
)

// VectorIndexWorker runs one step of the active profile's vector index
// (jobs.VectorIndex). A check reads what the index needs
// (searchindex.IndexStatus.Next): nothing, and it snoozes for
// VectorIndexInterval, coming back as the same row; a new generation, and
// it trains one (outside any transaction: a few seconds of every core at a
// million passages) and records it with the first assignment step in one
// transaction; passages to assign, and it inserts the first step. Each
// assignment step moves a batch of passages and commits it with the next
// step — or, with none left, makes the generation serve and schedules the
// next check — in one transaction, so a step killed midway is redone
// from the passages' own state and nothing is moved twice or left behind.
// Searches stay correct throughout: a passage is always in a live
// generation's list or in the pending list, and both are read.
type VectorIndexWorker struct {
	river.WorkerDefaults[jobs.VectorIndex]
	deps Dependencies
}

// Timeout implements river.Worker: a check that trains a generation of a
// few million passages takes minutes.
func (w *VectorIndexWorker) Timeout(*river.Job[jobs.VectorIndex]) time.Duration {
	return 30 * time.Minute
}

// NextRetry implements river.Worker: a failed step (the database briefly
// unavailable) runs again after a minute; what it had done is committed or
// undone.
func (w *VectorIndexWorker) NextRetry(*river.Job[jobs.VectorIndex]) time.Time {
	return w.deps.Now().Add(time.Minute)
}

// Work implements river.Worker.
func (w *VectorIndexWorker) Work(ctx context.Context, job *river.Job[jobs.VectorIndex]) error {
	logger := jobqueue.Logger(ctx, w.deps.Logger)
	if w.deps.Embedder == nil {
		logger.InfoContext(ctx, "no embedding profile is configured; the vector index's steps stop")
		return nil
	}
	profile, err := w.deps.profile.id(ctx, w.deps)
	if err != nil {
		return err
	}
	client := river.ClientFromContext[pgx.Tx](ctx)
	if job.Args.Profile != profile {
		// A step of an earlier profile's index: that profile's searches
		// are over, and the active one's index is checked instead.
		return pgx.BeginFunc(ctx, w.deps.Pool, func(tx pgx.Tx) error {
			if _, err := client.InsertTx(ctx, tx, jobs.VectorIndex{Profile: profile}, nil); err != nil {
				return fmt.Errorf("vector index: schedule a check: %w", err)
			}
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		})
	}
	if job.Args.Generation == 0 {
		return w.check(ctx, job, client, logger)
	}
	return w.assign(ctx, job, client, logger)
}

// check decides the index's next step and begins it.
func (w *VectorIndexWorker) check(ctx context.Context, job *river.Job[jobs.VectorIndex], client *river.Client[pgx.Tx], logger *slog.Logger) error {
	profile := job.Args.Profile
	status, err := searchindex.ReadIndexStatus(ctx, w.deps.Pool, profile)
	if err != nil {
		return err
	}
	next := status.Next()
	attrs := []any{slog.Int("profile", int(profile)), slog.Int64("passages", status.Passages), slog.Int64("pending", status.Pending),
		slog.Int("serving", int(status.Serving)), slog.Int("lists", status.ServingLists), slog.String("step", next.String())}
	var trained *searchindex.TrainedGeneration
	switch next {
	case searchindex.IndexCurrent:
		logger.DebugContext(ctx, "the vector index is current", attrs...)
		return river.JobSnooze(VectorIndexInterval)
	case searchindex.IndexTrain:
		start := w.deps.Now()
		if trained, err = searchindex.TrainGeneration(ctx, w.deps.Pool, status); err != nil {
			return err
		}
		attrs = append(attrs, slog.Int("new_lists", len(trained.Centroids)), slog.Duration("training", w.deps.Now().Sub(start)))
	}
	target := status.Target()
	err = pgx.BeginFunc(ctx, w.deps.Pool, func(tx pgx.Tx) error {
		if trained != nil {
			if target, err = searchindex.BeginGeneration(ctx, tx, trained); err != nil {
				return err
			}
		}
		if _, err := client.InsertTx(ctx, tx, jobs.VectorIndex{Profile: profile, Generation: target, Batch: 1}, nil); err != nil {
			return fmt.Errorf("vector index: schedule the first step: %w", err)
		}
		_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	logger.InfoContext(ctx, "vector index step scheduled", append(attrs, slog.Int("generation", int(target)))...)
	return nil
}

// assign runs one assignment step.
func (w *VectorIndexWorker) assign(ctx context.Context, job *river.Job[jobs.VectorIndex], client *river.Client[pgx.Tx], logger *slog.Logger) error {
	args := job.Args
	batch := cmp.Or(w.deps.indexBatch, vectorIndexBatch)
	start := w.deps.Now()
	moved, done, gone := 0, false, false
	err := pgx.BeginFunc(ctx, w.deps.Pool, func(tx pgx.Tx) error {
		var err error
		moved, err = w.deps.vectorIndex.AssignBatch(ctx, tx, args.Profile, args.Generation, batch)
		switch {
		case errors.Is(err, searchindex.ErrGenerationGone):
			gone = true
		case err != nil:
			return err
		case moved < batch:
			if done, err = searchindex.FinishGeneration(ctx, tx, args.Profile, args.Generation); err != nil {
				return err
			}
		}
		next := jobs.VectorIndex{Profile: args.Profile, Generation: args.Generation, Batch: args.Batch + 1}
		opts := &river.InsertOpts{}
		switch {
		case done:
			next = jobs.VectorIndex{Profile: args.Profile}
			opts.ScheduledAt = w.deps.Now().Add(VectorIndexInterval)
		case gone:
			next = jobs.VectorIndex{Profile: args.Profile}
		}
		if _, err := client.InsertTx(ctx, tx, next, opts); err != nil {
			return fmt.Errorf("vector index: schedule the next step: %w", err)
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	attrs := []any{slog.Int("profile", int(args.Profile)), slog.Int("generation", int(args.Generation)), slog.Int("batch", args.Batch),
		slog.Int("passages", moved), slog.Duration("duration", w.deps.Now().Sub(start))}
	switch {
	case gone:
		logger.InfoContext(ctx, "vector index generation replaced; its steps stop", attrs...)
	case done:
		if args.Batch > 1 {
			// The moved rows' index entries are visible to an index-only
			// scan once their pages are all-visible: vacuum now rather than
			// whenever autovacuum comes, so probes read the index alone.
			// Nothing depends on it succeeding.
			vacuumed := w.deps.Now()
			if err := searchindex.VacuumLists(ctx, w.deps.Pool); err != nil {
				logger.WarnContext(ctx, "vacuuming the vector index failed; autovacuum will", slog.String("error_type", failure.Name(err)))
			}
			attrs = append(attrs, slog.Duration("vacuum", w.deps.Now().Sub(vacuumed)))
		}
		logger.InfoContext(ctx, "vector index generation serving: every passage is in its lists", attrs...)
	default:
		logger.InfoContext(ctx, "vector index step committed", attrs...)
	}
	return nil
}

// ScheduleVectorIndex makes sure, when an embedding profile is configured,
// that a check of its vector index is coming now: it inserts one unless a
// step is already pending, scheduled or running, and makes a waiting one
// due now (the profile may have changed since it was scheduled).
func ScheduleVectorIndex(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx]) (bool, error) {
	if deps.Embedder == nil {
		return false, nil
	}
	p := deps.Embedder.Profile()
	profile, err := searchindex.EnsureProfile(ctx, deps.Pool, p.Model, p.Dimensions)
	if err != nil {
		return false, err
	}
	inserted := false
	err = pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
		// The embedding backfill's namespace, keyed apart: both are the
		// active profile's, scheduled at the same moment.
		if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleEmbeddingBackfill, jobs.VectorIndex{}.Kind()); err != nil {
			return err
		}
		pending, err := jobqueue.Pending(ctx, tx, jobs.VectorIndex{}.Kind(), "", 0)
		if err != nil {
			return err
		}
		if pending {
			_, err := jobqueue.MakeDue(ctx, tx, jobs.VectorIndex{}.Kind())
			return err
		}
		_, err = client.InsertTx(ctx, tx, jobs.VectorIndex{Profile: profile}, nil)
		inserted = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("schedule the vector index: %w", err)
	}
	return inserted, nil
}
