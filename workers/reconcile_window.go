package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/backwardpass"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/jobs"
)

// ReconcileWindowWorker runs the backward pass (package backwardpass) over
// one alias's latest binding.
type ReconcileWindowWorker struct {
	river.WorkerDefaults[jobs.ReconcileWindow]
	deps Dependencies
}

// Timeout implements river.Worker.
func (w *ReconcileWindowWorker) Timeout(*river.Job[jobs.ReconcileWindow]) time.Duration {
	return 15 * time.Minute
}

// NextRetry implements river.Worker with the run backoff.
func (w *ReconcileWindowWorker) NextRetry(job *river.Job[jobs.ReconcileWindow]) time.Time {
	s := w.deps.Config.Sync
	return w.deps.Now().Add(RunBackoff(s.Interval, s.MaxFailureBackoff, job.Attempt))
}

// Work implements river.Worker. A window a folder pass carried over its
// own session never reaches here; one that does — its pass's process
// stopped first, or the pass handed it back — runs over a session of its
// own, which enables QRESYNC where the server offers it.
func (w *ReconcileWindowWorker) Work(ctx context.Context, job *river.Job[jobs.ReconcileWindow]) error {
	logger := jobqueue.Annotate(ctx, w.deps.Logger, slog.String("account", job.Args.AccountID), slog.String("alias", job.Args.Alias))
	unit, err := w.deps.openBindingUnit(ctx, job.ID, job.Args.AccountID, job.Args.Alias, logger)
	if unit == nil {
		return err
	}
	defer unit.release()

	sess, err := w.deps.openReconciliation(ctx, unit.account, unit.binding.Alias)
	if err != nil {
		return err
	}
	defer func() { _ = sess.Close() }()
	return w.deps.window(ctx, unit, sess, ownJob(job), logger)
}

// window runs the backward pass over unit's binding as job, over sess,
// and completes job with its report.
func (d Dependencies) window(ctx context.Context, unit *bindingUnit, sess *mailsession.Session, job unitJob, logger *slog.Logger) error {
	rep, err := backwardpass.Run(ctx, unit.conn, sess, unit.binding, backwardpass.Options{
		WindowSize:  d.Config.Sync.MaxReconciledEmailsPerRun,
		Disposition: mailstore.Disposition(unit.account.RemotelyDeletedEmailDisposition),
	}, logger)
	if err != nil {
		return err
	}
	if err := job.completeNow(ctx, unit.conn, rep); err != nil {
		return err
	}
	attrs := []any{slog.Int("window", rep.Window), slog.Int("refreshed", rep.Refreshed), slog.Int("confirmed", rep.Confirmed),
		slog.Int("superseded", rep.Superseded), slog.String("mode", rep.Mode), slog.Bool("narrowed", rep.Narrowed),
		slog.Bool("more_to_reconcile", !rep.QueueEmptied)}
	if rep.Cycle != "" {
		attrs = append(attrs, slog.String("cycle", rep.Cycle))
	}
	if len(rep.Withheld) > 0 {
		// On a line of its own: mail MailFathom moved, deleted or marked
		// is not mail that vanished or was read by someone.
		logger.InfoContext(ctx, "changes recognized as MailFathom's own and withheld",
			slog.Int("withheld_changes", len(rep.Withheld)),
			slog.Int("left_by_mailfathom", rep.LeftByMailFathom), slog.Int("seen_by_mailfathom", rep.SeenByMailFathom))
		for _, c := range rep.Withheld {
			logger.DebugContext(ctx, "change withheld: MailFathom's own", slog.String("kind", string(c.Kind)),
				slog.String("mutation", c.MutationID.String()), slog.String("email", c.EmailID.String()))
		}
	}
	if gone := rep.Gone(); gone > 0 {
		logger.WarnContext(ctx, "messages left the folder on the server",
			append(attrs, slog.Int("gone", gone), slog.String("disposition", rep.Disposition))...)
	} else {
		logger.InfoContext(ctx, "reconciliation window applied", attrs...)
	}
	return nil
}
