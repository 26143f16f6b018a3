package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/extraction"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/internal/synchronizer"
	"github.com/mailfathom/mailfathom/jobs"
)

// FolderPassWorker runs the forward pass over one alias's latest binding.
//
// A pass is bounded by MaxMetadataBatchesPerRun; one that leaves work behind
// snoozes itself to run again at once, behind whatever else is queued, so a
// large folder keeps advancing without holding a worker slot for hours and
// without waiting out the interval.
type FolderPassWorker struct {
	river.WorkerDefaults[jobs.FolderPass]
	deps Dependencies
}

// Timeout implements river.Worker. One pass moves at most
// MaxMetadataBatchesPerRun × MaxMetadataBatchSize messages.
func (w *FolderPassWorker) Timeout(*river.Job[jobs.FolderPass]) time.Duration {
	return time.Hour
}

// NextRetry implements river.Worker with the run backoff.
func (w *FolderPassWorker) NextRetry(job *river.Job[jobs.FolderPass]) time.Time {
	s := w.deps.Config.Sync
	return w.deps.Now().Add(RunBackoff(s.Interval, s.MaxFailureBackoff, job.Attempt))
}

// Work implements river.Worker.
func (w *FolderPassWorker) Work(ctx context.Context, job *river.Job[jobs.FolderPass]) error {
	cfg := w.deps.Config
	logger := jobqueue.Logger(ctx, w.deps.Logger).With(slog.String("account", job.Args.AccountID), slog.String("alias", job.Args.Alias))
	account, ok := mailendpoint.Find(cfg, job.Args.AccountID)
	if !ok || !cfg.Sync.Enabled {
		logger.InfoContext(ctx, "folder pass skipped: the account is no longer configured or synchronization is disabled")
		return nil
	}

	conn, release, err := acquireWorkConn(ctx, w.deps.Pool, job.ID)
	if err != nil {
		return fmt.Errorf("folder pass: %w", err)
	}
	defer release()
	held, err := slots.Acquire(ctx, conn, mailendpoint.AccountKey(account.ID), bounds(cfg))
	if errors.Is(err, slots.ErrFull) {
		return river.JobSnooze(deferral())
	}
	if err != nil {
		return err
	}
	defer func() { _ = held.Release(context.WithoutCancel(ctx)) }()

	accountID, err := mailstore.EnsureAccount(ctx, conn, mailendpoint.AccountKey(account.ID))
	if err != nil {
		return err
	}
	binding, ok, err := mailstore.LatestBinding(ctx, conn, accountID, job.Args.Alias)
	if err != nil {
		return err
	}
	if !ok {
		logger.InfoContext(ctx, "folder pass skipped: the alias has no binding yet")
		return nil
	}

	ep, err := mailendpoint.Endpoint(ctx, account, w.deps.Resolver)
	if err != nil {
		return w.fail(ctx, logger, err)
	}
	sess, err := w.deps.OpenSession(ctx, ep)
	if err != nil {
		return w.fail(ctx, logger, err)
	}
	rep, err := synchronizer.ForwardPass(ctx, conn, sess, binding, synchronizer.Limits{
		BatchSize:       cfg.Sync.MaxMetadataBatchSize,
		BatchesPerRun:   cfg.Sync.MaxMetadataBatchesPerRun,
		MaxRawMimeBytes: cfg.Sync.MaxRawMimeBytes,
		EarliestDate:    account.EarliestEmailReceivedDate,
		Extraction:      extraction.LimitsFrom(cfg),
	}, logger)
	closeErr := sess.Close()
	_ = river.RecordOutput(ctx, rep)
	logReport(ctx, logger, rep, err)
	if err != nil {
		return w.fail(ctx, logger, err)
	}
	_ = closeErr // everything the pass read is committed; a failed logout changes nothing
	if rep.More {
		return river.JobSnooze(0)
	}
	return nil
}

func logReport(ctx context.Context, logger *slog.Logger, rep synchronizer.Report, err error) {
	attrs := []any{
		slog.Int("stored", rep.Stored), slog.Int("unreadable", rep.Unreadable), slog.Int("oversized", rep.Oversized),
		slog.Int("excluded_by_date", rep.ExcludedByDate), slog.Int("vanished", rep.Vanished),
		slog.Int("batches", rep.Batches), slog.Int64("bytes", rep.Bytes),
		slog.Int("recoveries", rep.Recoveries), slog.Duration("duration", rep.Duration),
		slog.Uint64("checkpoint_uid", uint64(rep.CheckpointUID)), slog.Bool("more", rep.More),
	}
	if rep.ProgressReset {
		attrs = append(attrs, slog.Bool("progress_reset", true))
	}
	if err != nil {
		logger.WarnContext(ctx, "folder pass ended early", append(attrs, slog.String("error_type", fmt.Sprintf("%T", err)))...)
		return
	}
	logger.InfoContext(ctx, "folder pass finished", attrs...)
}

// fail maps a pass failure onto River: a persistence conflict defers the
// folder, a transient failure (or a folder recreated under the run, which
// the next attempt starts over) is retried on the run backoff, and anything
// else is permanent for this pass; the account's next run schedules a new
// one.
func (w *FolderPassWorker) fail(ctx context.Context, logger *slog.Logger, err error) error {
	switch {
	case ctx.Err() != nil:
		return err
	case errors.Is(err, mailstore.ErrConcurrencyConflict):
		logger.InfoContext(ctx, "folder pass deferred: another run moved its checkpoint first")
		return river.JobSnooze(deferral())
	case errors.Is(err, imapx.ErrMailboxFolderRecreated):
		logger.WarnContext(ctx, "folder was recreated on the server during the pass; the next attempt starts it over")
		return err
	case transient(err):
		return err
	default:
		return river.JobCancel(err)
	}
}
