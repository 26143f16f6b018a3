package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/forwardpass"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/jobs"
)

// FolderPassWorker runs the forward pass over one alias's latest binding.
//
// A pass is bounded by MaxMetadataBatchesPerRun; one that leaves work behind
// snoozes itself to run again at once, behind whatever else is queued, so a
// large folder keeps advancing without holding a worker slot for hours and
// without waiting out the interval. A pass that stopped at the account's
// daily download budget snoozes until the budget's window has room again
// (download.go).
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
	logger := jobqueue.Annotate(ctx, w.deps.Logger, slog.String("account", job.Args.AccountID), slog.String("alias", job.Args.Alias))
	unit, err := w.deps.openBindingUnit(ctx, job.ID, job.Args.AccountID, job.Args.Alias, logger)
	if unit == nil {
		return err
	}
	defer unit.release()
	account, conn, binding := unit.account, unit.conn, unit.binding
	key := config.AccountKey(account.ID)

	// With a daily download budget, the pass claims its allowance before
	// it asks the server for anything, and waits when none is left.
	download, err := w.deps.claimDownload(ctx, conn, account, logger)
	if err != nil {
		return err
	}
	defer func() { _ = download.settle(ctx, conn, 0, 0, logger) }()

	// A change the mail server reported before this pass reads the folder
	// is covered by this pass.
	reportedAt, reported, err := mailstore.TakeChangeReport(ctx, conn, key, binding.Alias)
	if err != nil {
		return err
	}

	sess, err := w.deps.openMailbox(ctx, account, binding.Alias)
	if err != nil {
		return err
	}
	// A second connection lets PostgreSQL store two messages at once; it
	// holds no lock, so it is an ordinary pooled connection.
	second, err := w.deps.Pool.Acquire(ctx)
	if err != nil {
		return err
	}
	defer second.Release()
	rep, err := forwardpass.Run(ctx, conn, sess, binding, forwardpass.Options{
		SecondWriter:    second,
		BatchSize:       cfg.Sync.MaxMetadataBatchSize,
		BatchesPerRun:   cfg.Sync.MaxMetadataBatchesPerRun,
		MaxRawMimeBytes: cfg.Sync.MaxRawMimeBytes,
		CommitAttempts:  cfg.Persistence.MaximumConcurrencyCommitAttempts,
		Stopping:        w.deps.Stopping,
		EarliestDate:    account.EarliestEmailReceivedDate,
		Extraction:      cfg.Sync.MimeLimits(),
		AfterFinalCheckpoint: func(ctx context.Context, tx pgx.Tx) error {
			// Every pass is followed by one reconciliation window.
			_, err := river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx,
				jobs.ReconcileWindow{AccountID: account.ID, Alias: binding.Alias}, nil)
			return err
		},
		Offer:            w.deps.embeddingOffer(river.ClientFromContext[pgx.Tx](ctx), logger),
		MaxDownloadBytes: download.allowance(),
	}, logger)
	compression := sess.Compression()
	closeErr := sess.Close()
	rep.Recoveries = sess.Recoveries()
	_ = river.RecordOutput(ctx, rep)
	logReport(ctx, logger, rep, err)
	// What the pass committed counts whether or not it ended early.
	if rerr := mailstore.RecordPass(context.WithoutCancel(ctx), conn, key, binding.Alias, mailstore.PassCounts{
		Stored: rep.Stored, Oversized: rep.Oversized, Unreadable: rep.Unreadable, ExcludedByDate: rep.ExcludedByDate,
		ExpungedBeforeFetch: rep.ExpungedBeforeFetch, Withheld: rep.Withheld,
	}, err == nil && !rep.More, w.deps.Now()); rerr != nil && err == nil {
		err = rerr
	}
	if compression.Reason != "" {
		if rerr := mailstore.RecordCompression(context.WithoutCancel(ctx), conn, key, binding.Alias,
			mailstore.Compression{InUse: compression.InUse, Reason: compression.Reason}); rerr != nil && err == nil {
			err = rerr
		}
	}
	if rerr := mailstore.RecordExamined(context.WithoutCancel(ctx), conn, key, binding.Alias, rep.Observed.UIDNext); rerr != nil && err == nil {
		err = rerr
	}
	var needed int64
	if rep.BudgetReached {
		needed = rep.NextMessageBytes
	}
	pause := download.settle(ctx, conn, rep.RequestedBytes, needed, logger)
	if err != nil {
		return err
	}
	_ = closeErr // everything the pass read is committed; a failed logout changes nothing
	// The server answered the whole pass: throttles in a row start over.
	if rerr := mailstore.ResetThrottles(ctx, conn, key); rerr != nil {
		return rerr
	}
	if pause != nil {
		return pause
	}
	if rep.More {
		return river.JobSnooze(0)
	}
	// A change reported while this pass ran could not queue another pass
	// (a pass is unique while running), so it left a mark: taking it and
	// completing are one transaction, and a mark found makes the pass go
	// around once more. A report that comes after the commit finds the
	// pass completed and queues a new one.
	again := false
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		if _, again, err = mailstore.TakeChangeReport(ctx, tx, key, binding.Alias); err != nil || again {
			return err
		}
		// What the pass examined is what a watching session that starts
		// compares the folder with: everything below it is read.
		if err := mailstore.RecordObservedState(ctx, tx, key, binding.Alias, observed(binding, rep.Observed)); err != nil {
			return err
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	if reported {
		w.deps.Push.ObserveStored(account.ID, w.deps.Now().Sub(reportedAt))
	}
	if again {
		logger.InfoContext(ctx, "a change was reported while the pass ran; the folder is read once more")
		return river.JobSnooze(0)
	}
	return nil
}

// observed is what a pass of binding that examined st leaves for a
// watching session to compare the folder with.
func observed(binding mailstore.Binding, st imapx.FolderState) mailstore.ObservedState {
	return mailstore.ObservedState{BindingID: binding.ID, UIDValidity: st.UIDValidity, UIDNext: st.UIDNext,
		Exists: st.Exists, HighestModSeq: st.HighestModSeq}
}

func logReport(ctx context.Context, logger *slog.Logger, rep forwardpass.Report, err error) {
	attrs := []any{
		slog.Int("stored", rep.Stored), slog.Int("unreadable", rep.Unreadable), slog.Int("oversized", rep.Oversized),
		slog.Int("excluded_by_date", rep.ExcludedByDate), slog.Int("vanished", rep.Vanished),
		slog.Int("expunged_before_fetch", rep.ExpungedBeforeFetch), slog.Int("content_withheld", rep.Withheld),
		slog.Int("batches", rep.Batches), slog.Int64("bytes", rep.Bytes),
		slog.Int("recoveries", rep.Recoveries), slog.Duration("duration", rep.Duration),
		slog.Uint64("checkpoint_uid", uint64(rep.CheckpointUID)), slog.Bool("more", rep.More),
	}
	if rep.ProgressReset {
		attrs = append(attrs, slog.Bool("progress_reset", true))
	}
	if rep.BudgetReached {
		attrs = append(attrs, slog.Bool("download_budget_reached", true), slog.Int64("requested_bytes", rep.RequestedBytes),
			slog.Int64("next_message_bytes", rep.NextMessageBytes))
	}
	if rep.Cycle != "" {
		attrs = append(attrs, slog.String("cycle", rep.Cycle))
	}
	if n := rep.WithheldChanges(); n > 0 {
		// On a line of its own: mail MailFathom filed here is not new mail.
		logger.InfoContext(ctx, "discoveries recognized as changes of MailFathom's own and withheld",
			slog.Int("withheld_changes", n), slog.Int("carried_by_mailfathom", rep.CarriedByMailFathom),
			slog.Int("copied_by_mailfathom", rep.CopiedByMailFathom))
	}
	if err != nil {
		logger.WarnContext(ctx, "folder pass ended early", append(attrs, slog.String("error_type", failure.Name(err)))...)
		return
	}
	logger.InfoContext(ctx, "folder pass finished", attrs...)
}
