package workers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailfathom/mailfathom/internal/backfill"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/jobs"
)

// ExtractionBackfillWorker runs one batch of the extraction backfill
// (package backfill) and commits it with the next batch's job — or with
// none, which ends the backfill, when nothing is left.
type ExtractionBackfillWorker struct {
	river.WorkerDefaults[jobs.ExtractionBackfill]
	deps Dependencies
}

// backfillTextBudget bounds the text one batch writes, in multiples of
// MaxExtractedTextCharacters.
const backfillTextBudget = 4

// Timeout implements river.Worker.
func (w *ExtractionBackfillWorker) Timeout(*river.Job[jobs.ExtractionBackfill]) time.Duration {
	return 15 * time.Minute
}

// NextRetry implements river.Worker: a failed batch (the database briefly
// unavailable, say) is tried again after the backfill's interval; the
// committed position means nothing is redone.
func (w *ExtractionBackfillWorker) NextRetry(*river.Job[jobs.ExtractionBackfill]) time.Time {
	return w.deps.Now().Add(w.deps.Config.Backfill.Interval)
}

// Work implements river.Worker.
func (w *ExtractionBackfillWorker) Work(ctx context.Context, job *river.Job[jobs.ExtractionBackfill]) error {
	cfg := w.deps.Config
	logger := jobqueue.Logger(ctx, w.deps.Logger)
	if !cfg.Backfill.Enabled {
		logger.InfoContext(ctx, "extraction backfill is disabled; it stops")
		return nil
	}
	conn, release, err := w.deps.acquireWorkConn(ctx, job.ID)
	if err != nil {
		return fmt.Errorf("extraction backfill: %w", err)
	}
	defer release()

	client := river.ClientFromContext[pgx.Tx](ctx)
	start := w.deps.Now()
	var res backfill.Result
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		res, err = backfill.RunBatch(ctx, tx, backfill.Options{
			BatchSize:  cfg.Backfill.BatchSize,
			TextBudget: backfillTextBudget * cfg.Sync.MaxExtractedTextCharacters,
			Limits:     cfg.Sync.MimeLimits(),
			Offer:      w.deps.embeddingOffer(client, logger),
		})
		if err != nil {
			return err
		}
		if !res.Done {
			next := jobs.ExtractionBackfill{BatchInRun: job.Args.BatchInRun + 1}
			opts := &river.InsertOpts{}
			if next.BatchInRun >= cfg.Backfill.MaxBatchesPerRun {
				next.BatchInRun = 0
				opts.ScheduledAt = w.deps.Now().Add(cfg.Backfill.Interval)
			}
			if _, err := client.InsertTx(ctx, tx, next, opts); err != nil {
				return fmt.Errorf("extraction backfill: schedule the next batch: %w", err)
			}
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	attrs := []any{slog.Int("read", res.Read), slog.Int("unreadable", res.Unreadable), slog.Duration("duration", w.deps.Now().Sub(start))}
	if res.Done {
		logger.InfoContext(ctx, "extraction backfill finished: no stored message awaits extraction", attrs...)
		return nil
	}
	logger.InfoContext(ctx, "extraction backfill batch committed", attrs...)
	return nil
}

// ScheduleExtractionBackfill inserts a backfill batch, now, unless one is
// already pending, scheduled or running, when the backfill is enabled. A
// deployment with nothing to backfill pays one query: the batch finds no
// work and ends.
func ScheduleExtractionBackfill(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx]) (bool, error) {
	if !deps.Config.Backfill.Enabled {
		return false, nil
	}
	inserted := false
	err := pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
		if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleExtractionBackfill, ""); err != nil {
			return err
		}
		pending, err := jobqueue.Pending(ctx, tx, jobs.ExtractionBackfill{}.Kind(), "", 0)
		if err != nil || pending {
			return err
		}
		_, err = client.InsertTx(ctx, tx, jobs.ExtractionBackfill{}, nil)
		inserted = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("schedule extraction backfill: %w", err)
	}
	return inserted, nil
}
