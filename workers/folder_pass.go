package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/forwardpass"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/jobs"
)

// FolderPassWorker runs the forward pass over one alias's latest binding,
// and the reconciliation window after it over the same session (carry.go).
//
// A round of the pass is bounded by MaxMetadataBatchesPerRun; one that
// leaves work behind goes on over the same session while nothing else of
// the account waits, for at most carryFor, and then snoozes itself to run
// again at once, behind whatever else is queued, so a large folder keeps
// advancing without holding a worker slot for hours and without waiting
// out the interval. A pass that stopped at the account's daily download
// budget snoozes until the budget's window has room again (download.go).
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
	logger := jobqueue.Annotate(ctx, w.deps.Logger, slog.String("account", job.Args.AccountID), slog.String("alias", job.Args.Alias))
	unit, err := w.deps.openBindingUnit(ctx, job.ID, job.Args.AccountID, job.Args.Alias, logger)
	if unit == nil {
		return err
	}
	defer unit.release()
	c := w.deps.newCarrier(job.ID, unit.conn, unit.account)
	defer c.close()
	return c.pass(ctx, unit, ownJob(job), logger)
}

// pass runs unit's forward pass as job over the carrier's session, round
// after round while the folder has more and the carrier may go on (more),
// then carries the reconciliation window its final checkpoint scheduled
// over the same session, and completes job: River shows the pass running
// until its window is done. A pass that stops with work left snoozes to go
// on at once, behind whatever else is queued.
func (c *carrier) pass(ctx context.Context, unit *bindingUnit, job unitJob, logger *slog.Logger) error {
	var window *rivertype.JobRow
	for {
		rep, done, err := c.passRound(ctx, unit, job, &window, logger)
		if err == nil && !done && !c.more(ctx) {
			err = river.JobSnooze(0)
		}
		if err != nil {
			if window != nil {
				// Scheduled by a round before a change report made the
				// pass go around again: the window is River's now.
				c.release(ctx, logger, c.deps.Now(), window.ID)
			}
			return err
		}
		if !done {
			continue
		}
		if window != nil {
			c.carry(ctx, window, logger, func(ctx context.Context, wj unitJob) error {
				sess, err := c.session(ctx, unit.binding.Alias)
				if err != nil {
					return err
				}
				return c.deps.window(ctx, unit, sess, wj, jobqueue.Logger(ctx, logger))
			})
			window = nil
		}
		again, err := c.completePass(ctx, unit, job, rep)
		if err != nil || !again {
			return err
		}
		logger.InfoContext(ctx, "a change was reported while the pass ran; the folder is read once more")
		if !c.more(ctx) {
			return river.JobSnooze(0)
		}
	}
}

// completePass completes job, the pass over unit that reached the folder's
// end with rep, unless a change the server reported while it ran left a
// mark: a pass is unique while running, so a report could not queue
// another, and taking the mark and completing are one transaction. It
// reports whether it found one, and then the pass goes around once more.
// A report that comes after the commit finds the pass completed and
// queues a new one.
func (c *carrier) completePass(ctx context.Context, unit *bindingUnit, job unitJob, rep forwardpass.Report) (bool, error) {
	key := config.AccountKey(unit.account.ID)
	again := false
	err := pgx.BeginFunc(ctx, unit.conn, func(tx pgx.Tx) error {
		var err error
		if _, again, err = mailstore.TakeChangeReport(ctx, tx, key, unit.binding.Alias); err != nil || again {
			return err
		}
		// What the pass examined is what a watching session that starts
		// compares the folder with: everything below it is read.
		if err := mailstore.RecordObservedState(ctx, tx, key, unit.binding.Alias, observed(unit.binding, rep.Observed)); err != nil {
			return err
		}
		return job.complete(ctx, tx, rep)
	})
	return again, err
}

// passRound runs one round of the forward pass, bounded by
// MaxMetadataBatchesPerRun, and reports whether it reached the folder's
// end (done), with its report. A round that stopped at the account's daily
// download budget returns the snooze until the budget has room
// (download.go). window is set to the reconciliation window the final
// checkpoint scheduled for the carrier.
func (c *carrier) passRound(ctx context.Context, unit *bindingUnit, job unitJob, window **rivertype.JobRow, logger *slog.Logger) (forwardpass.Report, bool, error) {
	cfg := c.deps.Config
	account, conn, binding := unit.account, unit.conn, unit.binding
	key := config.AccountKey(account.ID)

	// With a daily download budget, the pass claims its allowance before
	// it asks the server for anything, and waits when none is left.
	download, err := c.deps.claimDownload(ctx, conn, account, logger)
	if err != nil {
		return forwardpass.Report{}, false, err
	}
	defer func() { _ = download.settle(ctx, conn, 0, 0, logger) }()

	// A change the mail server reported before this pass reads the folder
	// is covered by this pass.
	reportedAt, reported, err := mailstore.TakeChangeReport(ctx, conn, key, binding.Alias)
	if err != nil {
		return forwardpass.Report{}, false, err
	}

	sess, err := c.session(ctx, binding.Alias)
	if err != nil {
		return forwardpass.Report{}, false, err
	}
	recoveries := sess.Recoveries()
	// A second connection lets PostgreSQL store two messages at once; it
	// holds no lock, so it is an ordinary pooled connection.
	second, err := c.deps.Pool.Acquire(ctx)
	if err != nil {
		return forwardpass.Report{}, false, err
	}
	defer second.Release()
	client := river.ClientFromContext[pgx.Tx](ctx)
	rep, err := forwardpass.Run(ctx, conn, sess, binding, forwardpass.Options{
		SecondWriter:    second,
		BatchSize:       cfg.Sync.MaxMetadataBatchSize,
		BatchesPerRun:   cfg.Sync.MaxMetadataBatchesPerRun,
		MaxRawMimeBytes: cfg.Sync.MaxRawMimeBytes,
		CommitAttempts:  cfg.Persistence.MaximumConcurrencyCommitAttempts,
		Stopping:        c.deps.Stopping,
		EarliestDate:    account.EarliestEmailReceivedDate,
		Extraction:      cfg.Sync.MimeLimits(),
		AfterFinalCheckpoint: func(ctx context.Context, tx pgx.Tx) error {
			// Every pass is followed by one reconciliation window, which
			// the carrier carries over the pass's session.
			res, err := client.InsertTx(ctx, tx, jobs.ReconcileWindow{AccountID: account.ID, Alias: binding.Alias}, jobqueue.Carried(c.id))
			if err == nil && !res.UniqueSkippedAsDuplicate {
				*window = res.Job
			}
			return err
		},
		Offer:            c.deps.embeddingOffer(client, logger),
		MaxDownloadBytes: download.allowance(),
	}, logger)
	compression := sess.Compression()
	rep.Recoveries = sess.Recoveries() - recoveries
	job.record(ctx, rep)
	logReport(ctx, logger, rep, err)
	// What the pass committed counts whether or not it ended early.
	if rerr := mailstore.RecordPass(context.WithoutCancel(ctx), conn, key, binding.Alias, mailstore.PassCounts{
		Stored: rep.Stored, Oversized: rep.Oversized, Unreadable: rep.Unreadable, ExcludedByDate: rep.ExcludedByDate,
		ExpungedBeforeFetch: rep.ExpungedBeforeFetch, Withheld: rep.Withheld,
	}, err == nil && !rep.More, c.deps.Now()); rerr != nil && err == nil {
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
		return forwardpass.Report{}, false, err
	}
	// The server answered the whole pass: throttles in a row start over.
	if rerr := mailstore.ResetThrottles(ctx, conn, key); rerr != nil {
		return rep, false, rerr
	}
	if pause != nil {
		return rep, false, pause
	}
	if rep.More {
		return rep, false, nil
	}
	if reported {
		c.deps.Push.ObserveStored(account.ID, c.deps.Now().Sub(reportedAt))
	}
	return rep, true, nil
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
