// Package backwardpass runs the backward pass over one alias binding: it
// asks the server, over a read-only session, about a bounded window of mail
// already stored and applies the answer — refreshed flag snapshots, and for
// mail the server no longer holds the account's disposition, a tombstone or
// an erased local copy.
//
// The question is flags and existence only (imapx.ReconcileItems carries no
// body or header item), so nothing the pass issues can set \Seen. Where the
// server reports modification sequences it is narrowed to what changed
// since the sequence the folder's checkpoint records, and a pass whose
// window emptied the folder's reconciliation queue records the new one. The
// window is chosen and applied by package mailstore; this package decides
// what the server's answer means.
//
// It is the mirror of package forwardpass, which walks new mail above the
// checkpoint.
package backwardpass

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// Session is the part of a read-only IMAP session the backward pass uses;
// *mailsession.Session implements it, running each call under the
// account's resilience pipelines.
type Session interface {
	Examine(ctx context.Context, path string) (imapx.FolderState, error)
	Reconcile(ctx context.Context, window []uint32, sinceModSeq uint64) (imapx.ReconcileAnswer, error)
	ExistingUIDs(ctx context.Context, uids []uint32) ([]uint32, error)
}

// DB is where the pass reads and writes: a connection the caller holds for
// the pass.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	mailstore.Querier
}

// Options bound one pass.
type Options struct {
	// WindowSize is MaxReconciledEmailsPerRun: the occurrences one pass
	// asks about. Required.
	WindowSize int
	// Disposition is what happens locally to mail the server no longer
	// holds. Required.
	Disposition mailstore.Disposition
}

// Report is a pass's outcome, in counts: no mail content.
type Report struct {
	mailstore.ReconcileResult
	Window int `json:"window"`
	// Mode is the question the server's capabilities selected: FLAGS,
	// CONDSTORE or QRESYNC.
	Mode string `json:"mode"`
	// Narrowed reports that the question asked only about changes since a
	// recorded modification sequence.
	Narrowed bool `json:"narrowed"`
	// QueueEmptied reports that the window held the folder's whole
	// reconciliation queue.
	QueueEmptied bool `json:"queue_emptied"`
	// Contradicted counts UIDs a disappearance report named that a search
	// still found, and which were therefore kept.
	Contradicted int           `json:"contradicted,omitempty"`
	Disposition  string        `json:"disposition"`
	Duration     time.Duration `json:"duration_ns"`
}

// Run runs one pass over binding and returns what it applied.
func Run(ctx context.Context, db DB, sess Session, binding mailstore.Binding, opts Options, logger *slog.Logger) (rep Report, err error) {
	start := time.Now()
	defer func() { rep.Duration = time.Since(start) }()
	rep.Disposition = string(opts.Disposition)

	cp, hasCP, err := mailstore.ReadCheckpoint(ctx, db, binding.ID)
	if err != nil {
		return rep, err
	}
	state, err := sess.Examine(ctx, binding.RemotePath)
	if err != nil {
		return rep, err
	}

	// The window is taken under the UIDVALIDITY the session reports: mail
	// of an abandoned UID space is never asked about, so a renumbered
	// folder can never cause a local deletion.
	window, err := mailstore.SelectReconcileWindow(ctx, db, binding.ID, state.UIDValidity, opts.WindowSize)
	if err != nil {
		return rep, err
	}
	rep.Window, rep.QueueEmptied = len(window.Entries), window.Exhausted
	var since uint64
	if hasCP && cp.UIDValidity == state.UIDValidity && cp.HighestModSeq != nil {
		since = *cp.HighestModSeq
	}
	ans, err := sess.Reconcile(ctx, window.UIDs(), since)
	if err != nil {
		return rep, err
	}
	rep.Mode, rep.Narrowed = modeName(ans.Mode), ans.Narrowed

	answer := mailstore.ReconcileAnswer{Present: make(map[uint32]bool, len(ans.Present)), Flags: make(map[uint32][]string, len(ans.Changed))}
	for _, u := range ans.Present {
		answer.Present[u] = true
	}
	if misreportSuspected(len(ans.Vanished), len(window.Entries)) {
		// A large share of the window reported gone at once is how a
		// malformed or over-broad report empties a mirror: confirm it with
		// a search that returns identifiers only, and act only on the UIDs
		// the server also fails to find.
		still, err := sess.ExistingUIDs(ctx, ans.Vanished)
		if err != nil {
			return rep, err
		}
		for _, u := range still {
			answer.Present[u] = true
		}
		rep.Contradicted = len(still)
		if len(still) > 0 {
			logger.WarnContext(ctx, "the server reported messages gone that a search still finds; they are kept",
				slog.Int("contradicted", len(still)), slog.Int("reported_gone", len(ans.Vanished)))
		}
	}
	for _, c := range ans.Changed {
		answer.Flags[c.UID] = c.Flags
	}

	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		res, err := mailstore.ApplyReconciliation(ctx, tx, window, answer, opts.Disposition)
		if err != nil {
			return err
		}
		rep.ReconcileResult = res
		// Only a pass that emptied the queue records a sequence: recording
		// one after a partial pass would claim the rows it never reached.
		if window.Exhausted && ans.HighestModSeq > 0 {
			return mailstore.RecordModSeq(ctx, tx, binding.ID, state.UIDValidity, ans.HighestModSeq)
		}
		return nil
	})
	return rep, err
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
