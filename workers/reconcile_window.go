package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/reconciliation"
	"github.com/mailfathom/mailfathom/jobs"
)

// ReconcileWindowWorker runs the backward pass over one alias's latest
// binding: it asks the server, over a read-only session, about a bounded
// window of stored mail (flags and existence only — ReconcileItems carries
// no body or header item), and applies the answer: refreshed flag
// snapshots, and for mail the server no longer holds the account's
// disposition, a tombstone or an erased local copy. Where the server
// reports modification sequences the question is narrowed to what changed
// since the sequence the folder's checkpoint records, and a pass whose
// window emptied the folder's queue records the new one.
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

// reconcileReport is a window's outcome, in counts.
type reconcileReport struct {
	reconciliation.Result
	Window       int    `json:"window"`
	Mode         string `json:"mode"`
	Narrowed     bool   `json:"narrowed"`
	QueueEmptied bool   `json:"queue_emptied"`
	Disposition  string `json:"disposition"`
}

// Work implements river.Worker.
func (w *ReconcileWindowWorker) Work(ctx context.Context, job *river.Job[jobs.ReconcileWindow]) error {
	cfg := w.deps.Config
	logger := jobqueue.Logger(ctx, w.deps.Logger).With(slog.String("account", job.Args.AccountID), slog.String("alias", job.Args.Alias))
	unit, err := w.deps.openBindingUnit(ctx, job.ID, job.Args.AccountID, job.Args.Alias, logger)
	if unit == nil {
		return err
	}
	defer unit.release()
	account, conn, binding := unit.account, unit.conn, unit.binding

	cp, hasCP, err := mailstore.ReadCheckpoint(ctx, conn, binding.ID)
	if err != nil {
		return err
	}

	sess, err := w.deps.openMailbox(ctx, account, binding.Alias)
	if err != nil {
		return failUnit(ctx, logger, err)
	}
	defer func() { _ = sess.Close() }()
	state, err := sess.Examine(ctx, binding.RemotePath)
	if err != nil {
		return failUnit(ctx, logger, err)
	}

	// The window is taken under the UIDVALIDITY the session reports: mail
	// of an abandoned UID space is never asked about, so a renumbered
	// folder can never cause a local deletion.
	window, err := reconciliation.SelectWindow(ctx, conn, binding.ID, state.UIDValidity, cfg.Sync.MaxReconciledEmailsPerRun)
	if err != nil {
		return err
	}
	var since uint64
	if hasCP && cp.UIDValidity == state.UIDValidity && cp.HighestModSeq != nil {
		since = *cp.HighestModSeq
	}
	ans, err := sess.Reconcile(ctx, window.UIDs(), since)
	if err != nil {
		return failUnit(ctx, logger, err)
	}
	answer := reconciliation.Answer{Present: make(map[uint32]bool, len(ans.Present)), Flags: make(map[uint32][]string, len(ans.Changed))}
	for _, u := range ans.Present {
		answer.Present[u] = true
	}
	if misreportSuspected(len(ans.Vanished), len(window.Entries)) {
		// A large share of the window reported gone at once is how a
		// malformed or over-broad report empties a mirror: confirm it with a
		// search that returns identifiers only, and act only on the UIDs the
		// server also fails to find.
		still, err := sess.ExistingUIDs(ctx, ans.Vanished)
		if err != nil {
			return failUnit(ctx, logger, err)
		}
		for _, u := range still {
			answer.Present[u] = true
		}
		if len(still) > 0 {
			logger.WarnContext(ctx, "the server reported messages gone that a search still finds; they are kept",
				slog.Int("contradicted", len(still)), slog.Int("reported_gone", len(ans.Vanished)))
		}
	}
	for _, c := range ans.Changed {
		answer.Flags[c.UID] = c.Flags
	}
	disposition := reconciliation.Disposition(account.RemotelyDeletedEmailDisposition)

	rep := reconcileReport{Window: len(window.Entries), Mode: modeName(ans.Mode), Narrowed: ans.Narrowed,
		QueueEmptied: window.Exhausted, Disposition: string(disposition)}
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		res, err := reconciliation.Apply(ctx, tx, window, answer, disposition)
		if err != nil {
			return err
		}
		rep.Result = res
		// Only a pass that emptied the queue records a sequence: recording
		// one after a partial pass would claim the rows it never reached.
		if window.Exhausted && ans.HighestModSeq > 0 {
			return reconciliation.RecordModSeq(ctx, tx, binding.ID, state.UIDValidity, ans.HighestModSeq)
		}
		return nil
	})
	if err != nil {
		return failUnit(ctx, logger, err)
	}
	_ = river.RecordOutput(ctx, rep)
	attrs := []any{slog.Int("window", rep.Window), slog.Int("refreshed", rep.Refreshed), slog.Int("confirmed", rep.Confirmed),
		slog.Int("superseded", rep.Superseded), slog.String("mode", rep.Mode), slog.Bool("narrowed", rep.Narrowed),
		slog.Bool("more_to_reconcile", !rep.QueueEmptied)}
	if gone := rep.Gone(); gone > 0 {
		logger.WarnContext(ctx, "messages left the folder on the server",
			append(attrs, slog.Int("gone", gone), slog.String("disposition", rep.Disposition))...)
	} else {
		logger.InfoContext(ctx, "reconciliation window applied", attrs...)
	}
	return nil
}

// Misreport guard thresholds: a disappearance report is confirmed before it
// is applied when it covers at least misreportMinimum UIDs and more than
// misreportShare of the window. Ordinary deletions (a few messages, or most
// of a tiny window) are applied as reported.
const (
	misreportMinimum = 10
	misreportShare   = 0.25
)

func misreportSuspected(gone, window int) bool {
	return gone >= misreportMinimum && float64(gone) > misreportShare*float64(window)
}

func modeName(m imapx.ReconcileMode) string {
	switch m {
	case imapx.QResync:
		return "QRESYNC"
	case imapx.CondStore:
		return "CONDSTORE"
	default:
		return "FLAGS"
	}
}
