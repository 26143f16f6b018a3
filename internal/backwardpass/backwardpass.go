// Package backwardpass runs the backward pass over one alias binding: it
// asks the server, over a read-only session, about a bounded window of mail
// already stored and applies the answer — refreshed flag snapshots, and for
// mail the server no longer holds the account's disposition, a tombstone or
// an erased local copy.
//
// The question is flags and existence only (imapx.ReconcileItems carries no
// body or header item), so nothing the pass issues can set \Seen. The
// window is chosen and applied by package mailstore; this package decides
// what the server's answer means.
//
// Where the server reports modification sequences, a folder's first
// synchronization is its first reconciliation cycle (package forwardpass
// begins it and completes it), so the first window after it is already
// narrowed. A folder without a recorded sequence and no cycle in progress
// — stored before sequences were tracked, or back from a server that
// stopped reporting them — is walked window by window through a cycle of
// the backward pass's own: the first window's pass records the sequence
// the server reported and when, and the pass that finds every live
// occurrence observed since then records that sequence on the checkpoint;
// a window can equally complete a cycle the forward pass began (a carried
// relocation it had to ask about first). From then on a pass asks the whole folder
// what changed since the recorded sequence — one command with QRESYNC, two
// with CONDSTORE alone — and records the new one, so a quiet folder of any
// size costs a few commands a run and a change anywhere in it is seen by
// the next run. A server that stops reporting sequences, or reports one
// below the recorded one, sends the folder back to window-by-window passes
// and a new cycle.
//
// It is the mirror of package forwardpass, which walks new mail above the
// checkpoint.
package backwardpass

import (
	"context"
	"log/slog"
	"strings"
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
	ReconcileChanges(ctx context.Context, sinceModSeq uint64) (imapx.FolderChanges, error)
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
	// Narrowed reports that the question asked the whole folder only
	// about changes since a recorded modification sequence; Window then
	// counts the stored occurrences the answer named.
	Narrowed bool `json:"narrowed"`
	// QueueEmptied reports that the pass covered the whole folder: its
	// window held the folder's whole reconciliation queue, or it was
	// narrowed.
	QueueEmptied bool `json:"queue_emptied"`
	// Cycle is what the pass did to the folder's reconciliation cycle:
	// "started", "completed" (possibly both in one pass), "forgotten" (the
	// server stopped reporting usable sequences) or empty.
	Cycle string `json:"cycle,omitempty"`
	// NeverObserved counts the occurrences no question had described in
	// the folder that a narrowed pass asked about besides (see
	// askNeverObserved).
	NeverObserved int `json:"never_observed,omitempty"`
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
	sameScope := hasCP && cp.UIDValidity == state.UIDValidity
	if sameScope && cp.HighestModSeq != nil {
		asked := time.Now()
		changes, err := sess.ReconcileChanges(ctx, *cp.HighestModSeq)
		if err != nil {
			return rep, err
		}
		if changes.Narrowed {
			if rep, err = applyChanges(ctx, db, sess, binding, state.UIDValidity, changes, asked, opts, logger, rep); err != nil {
				return rep, err
			}
			return askNeverObserved(ctx, db, sess, binding, state.UIDValidity, opts, logger, rep)
		}
		// The recorded sequence can no longer narrow anything: the folder
		// goes back to windows and a new cycle.
		if err := mailstore.ForgetModSeq(ctx, db, binding.ID, state.UIDValidity); err != nil {
			return rep, err
		}
		rep.Cycle, cp.Cycle = "forgotten", nil
	}

	// The window is taken under the UIDVALIDITY the session reports: mail
	// of an abandoned UID space is never asked about, so a renumbered
	// folder can never cause a local deletion.
	window, err := mailstore.SelectReconcileWindow(ctx, db, binding.ID, state.UIDValidity, opts.WindowSize)
	if err != nil {
		return rep, err
	}
	rep.Window, rep.QueueEmptied = len(window.Entries), window.Exhausted
	// asked precedes the EXAMINE whose HIGHESTMODSEQ the answer carries:
	// every observation written at or after it reflects that sequence.
	asked := time.Now()
	ans, err := sess.Reconcile(ctx, window.UIDs(), 0)
	if err != nil {
		return rep, err
	}
	rep.Mode, rep.Narrowed = modeName(ans.Mode), ans.Narrowed
	err = applyWindow(ctx, db, sess, window, ans, opts, logger, &rep, func(ctx context.Context, tx pgx.Tx) error {
		return advanceCycle(ctx, tx, binding.ID, state.UIDValidity, sameScope && cp.Cycle != nil, ans, asked, &rep)
	})
	return rep, err
}

// applyWindow applies the server's answer about window in one transaction,
// with then (when set) in the same transaction, and adds what it applied
// to rep. A disappearance report out of proportion to the window is
// confirmed first (confirmGone).
func applyWindow(ctx context.Context, db DB, sess Session, window mailstore.ReconcileWindow, ans imapx.ReconcileAnswer,
	opts Options, logger *slog.Logger, rep *Report, then func(context.Context, pgx.Tx) error) error {
	answer := mailstore.ReconcileAnswer{Present: make(map[uint32]bool, len(ans.Present)), Flags: make(map[uint32][]string, len(ans.Changed))}
	for _, u := range ans.Present {
		answer.Present[u] = true
	}
	if misreportSuspected(len(ans.Vanished), len(window.Entries)) {
		if err := confirmGone(ctx, sess, ans.Vanished, answer, rep, logger); err != nil {
			return err
		}
	}
	for _, c := range ans.Changed {
		answer.Flags[c.UID] = c.Flags
		noteLabels(&answer, c)
	}
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		res, err := mailstore.ApplyReconciliation(ctx, tx, window, answer, opts.Disposition)
		if err != nil {
			return err
		}
		rep.ReconcileResult.Add(res)
		if then != nil {
			return then(ctx, tx)
		}
		return nil
	})
}

// askNeverObserved asks, after a narrowed question, about the occurrences
// no question has described in this folder (mailstore.SelectNeverObserved):
// one a relocation of MailFathom's own carried in keeps the flags of the
// folder it came from, unobserved, and its flags may have changed before
// the folder's recorded sequence, so no answer narrowed by that sequence
// would name it. They are asked without narrowing, at most a window of
// them a pass, and what the answer says is an observation like a window's.
// Nothing is asked when there are none.
func askNeverObserved(ctx context.Context, db DB, sess Session, binding mailstore.Binding, uidValidity uint32,
	opts Options, logger *slog.Logger, rep Report) (Report, error) {
	window, err := mailstore.SelectNeverObserved(ctx, db, binding.ID, uidValidity, opts.WindowSize)
	if err != nil || len(window.Entries) == 0 {
		return rep, err
	}
	ans, err := sess.Reconcile(ctx, window.UIDs(), 0)
	if err != nil {
		return rep, err
	}
	rep.NeverObserved = len(window.Entries)
	err = applyWindow(ctx, db, sess, window, ans, opts, logger, &rep, nil)
	return rep, err
}

// advanceCycle moves the folder's reconciliation cycle on after a window
// was applied, in the window's transaction: a server without sequences for
// the folder ends any cycle and recorded sequence; otherwise a cycle is
// started if none is in progress, and completed — its sequence recorded —
// once every live occurrence has been observed since it started. A window
// alone never records the sequence it observed: that would claim the rows
// it never reached.
func advanceCycle(ctx context.Context, tx pgx.Tx, folderID int64, uidValidity uint32, inCycle bool, ans imapx.ReconcileAnswer, asked time.Time, rep *Report) error {
	if ans.Mode == imapx.Plain {
		if rep.Cycle == "" && inCycle {
			rep.Cycle = "forgotten"
		}
		return mailstore.ForgetModSeq(ctx, tx, folderID, uidValidity)
	}
	if ans.HighestModSeq == 0 {
		return nil
	}
	if !inCycle {
		started, err := mailstore.StartReconcileCycle(ctx, tx, folderID, uidValidity,
			mailstore.ReconcileCycle{ModSeq: ans.HighestModSeq, StartedAt: asked})
		if err != nil {
			return err
		}
		if started {
			rep.Cycle = "started"
		}
	}
	completed, err := mailstore.CompleteReconcileCycle(ctx, tx, folderID, uidValidity)
	if err != nil {
		return err
	}
	if completed {
		rep.Cycle = strings.TrimPrefix(rep.Cycle+",completed", ",")
	}
	return nil
}

// applyChanges applies a whole-folder answer: the occurrences it described
// get their flags refreshed, those it reported gone (or, with CONDSTORE
// alone, those its search did not find) get the disposition, and every
// other stored occurrence keeps what it has, since nothing about it
// changed since the recorded sequence. The answer's sequence is recorded in
// the same transaction.
func applyChanges(ctx context.Context, db DB, sess Session, binding mailstore.Binding, uidValidity uint32, ch imapx.FolderChanges,
	asked time.Time, opts Options, logger *slog.Logger, rep Report) (Report, error) {
	rep.Mode, rep.Narrowed, rep.QueueEmptied = modeName(ch.Mode), true, true
	changed := make([]mailstore.UIDRange, 0, len(ch.Changed))
	answer := mailstore.ReconcileAnswer{Present: make(map[uint32]bool, len(ch.Changed)), Flags: make(map[uint32][]string, len(ch.Changed))}
	for _, c := range ch.Changed {
		if n := len(changed); n > 0 && changed[n-1].Last+1 == c.UID {
			changed[n-1].Last = c.UID
		} else {
			changed = append(changed, mailstore.UIDRange{First: c.UID, Last: c.UID})
		}
		answer.Present[c.UID], answer.Flags[c.UID] = true, c.Flags
		noteLabels(&answer, c)
	}
	described, err := mailstore.SelectOccurrencesIn(ctx, db, binding.ID, uidValidity, changed)
	if err != nil {
		return rep, err
	}
	var gone []mailstore.WindowEntry
	if ch.Mode == imapx.QResync {
		gone, err = mailstore.SelectOccurrencesIn(ctx, db, binding.ID, uidValidity, storeRanges(ch.Vanished))
	} else {
		gone, err = mailstore.SelectOccurrencesOutside(ctx, db, binding.ID, uidValidity, storeRanges(ch.Existing))
	}
	if err != nil {
		return rep, err
	}
	goneUIDs := make([]uint32, len(gone))
	for i, e := range gone {
		// Gone wins over described: a message expunged while the question
		// ran can be both.
		goneUIDs[i] = e.UID
		delete(answer.Present, e.UID)
		delete(answer.Flags, e.UID)
	}
	if len(gone) >= misreportMinimum {
		// The folder is the window here, and its size unknown without
		// counting it: every disappearance of this size is confirmed.
		if err := confirmGone(ctx, sess, goneUIDs, answer, &rep, logger); err != nil {
			return rep, err
		}
	}
	window := mailstore.ReconcileWindow{Entries: append(described, gone...), TakenAt: asked}
	rep.Window = len(window.Entries)
	err = pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		res, err := mailstore.ApplyReconciliation(ctx, tx, window, answer, opts.Disposition)
		if err != nil {
			return err
		}
		rep.ReconcileResult = res
		return mailstore.RecordModSeq(ctx, tx, binding.ID, uidValidity, ch.HighestModSeq)
	})
	return rep, err
}

// confirmGone asks, with a search that returns identifiers only, which of
// the UIDs reported gone the server still finds, and marks those present:
// a large share of a window reported gone at once is how a malformed or
// over-broad report empties a mirror, so only the UIDs the server also
// fails to find are acted on.
func confirmGone(ctx context.Context, sess Session, reported []uint32, answer mailstore.ReconcileAnswer, rep *Report, logger *slog.Logger) error {
	still, err := sess.ExistingUIDs(ctx, reported)
	if err != nil {
		return err
	}
	for _, u := range still {
		answer.Present[u] = true
	}
	rep.Contradicted = len(still)
	if len(still) > 0 {
		logger.WarnContext(ctx, "the server reported messages gone that a search still finds; they are kept",
			slog.Int("contradicted", len(still)), slog.Int("reported_gone", len(reported)))
	}
	return nil
}

func storeRanges(rs []imapx.UIDRange) []mailstore.UIDRange {
	out := make([]mailstore.UIDRange, len(rs))
	for i, r := range rs {
		out[i] = mailstore.UIDRange{First: r.First, Last: r.Last}
	}
	return out
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

// noteLabels adds the labels the server described with c's flags (Gmail's
// X-GM-LABELS) to answer: they are stored on the email, replacing what was
// stored, so a label removed on the server is removed locally.
func noteLabels(answer *mailstore.ReconcileAnswer, c imapx.FlagAnswer) {
	if !c.HasLabels {
		return
	}
	if answer.Labels == nil {
		answer.Labels = map[uint32][]string{}
	}
	answer.Labels[c.UID] = c.Labels
}
