package imapx

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// UIDRange is the closed range of UIDs First:Last, First <= Last.
type UIDRange struct{ First, Last uint32 }

// FolderChanges is what the server said changed in the whole open folder
// since a mod-sequence.
type FolderChanges struct {
	// Mode is the question the connection allowed: QResync or CondStore
	// when Narrowed, otherwise whatever stopped it (Plain for a server
	// without CONDSTORE or a folder reporting NOMODSEQ).
	Mode ReconcileMode
	// Narrowed reports that the question was asked. It is false, and
	// nothing but the EXAMINE was sent, when the connection or the folder
	// has no mod-sequences, or sinceModSeq is 0 or above the folder's
	// HIGHESTMODSEQ (a value the server cannot have produced in this
	// UIDVALIDITY): the caller then has no narrowed answer and must ask
	// about its stored mail window by window.
	Narrowed bool
	// Changed describes every message whose mod-sequence exceeds
	// sinceModSeq, ascending by UID: messages MailFathom may not have
	// stored yet among them.
	Changed []FlagAnswer
	// Vanished (QResync) are the UIDs the server reported expunged since
	// sinceModSeq, normalized. A server may name UIDs it never assigned
	// (RFC 7162 §3.2.6), so they say only what is gone, not what existed.
	Vanished []UIDRange
	// Existing (CondStore) is every UID the folder holds, from an
	// identifier-only search, normalized: a stored UID outside it left.
	Existing []UIDRange
	// HighestModSeq is the folder's HIGHESTMODSEQ as the EXAMINE right
	// before the question reported it: every change it covers was visible
	// to the question, so it is the next sinceModSeq.
	HighestModSeq uint64
	// Commands counts the commands sent after that EXAMINE.
	Commands int
}

// ReconcileChanges asks the open folder, as a whole, what changed since
// sinceModSeq (RFC 7162), over the reconciliation connection (see
// Reconcile), which examines the folder afresh first:
//
//   - QResync: one UID FETCH 1:* (FLAGS UID MODSEQ) (CHANGEDSINCE <m>
//     VANISHED). The changed messages are described, and the VANISHED
//     (EARLIER) report of the same command says which UIDs left.
//   - CondStore: the same fetch without VANISHED, then
//     UID SEARCH UID 1:* (RETURN (ALL) with ESEARCH), which returns
//     identifiers and no message data, for existence.
//
// It asks nothing, and answers Narrowed false, where no narrowed question
// is possible (see FolderChanges.Narrowed). Like Reconcile it sends nothing
// that changes a mailbox or sets \Seen. An expunge the server announces
// during the question (VANISHED) is added to Vanished; one it announces by
// sequence number is left to the next question, whose CHANGEDSINCE covers
// it because the expunge raised the folder's mod-sequence after the
// EXAMINE this answer's HighestModSeq came from.
//
// Errors: those of Reconcile.
func (s *ReadSession) ReconcileChanges(ctx context.Context, sinceModSeq uint64) (FolderChanges, error) {
	if err := s.openFolder(); err != nil {
		return FolderChanges{}, err
	}
	start := time.Now()
	var out FolderChanges
	err := s.reconcileOn(ctx, "UID FETCH", func(w *wire.Conn, st wire.ExamineData) error {
		out = FolderChanges{Mode: connMode(w)}
		if out.Mode != Plain && (st.NoModSeq || st.HighestModSeq == 0) {
			out.Mode = Plain
		}
		if out.Mode == Plain || sinceModSeq == 0 || sinceModSeq > st.HighestModSeq {
			return nil
		}
		out.Narrowed, out.HighestModSeq = true, st.HighestModSeq

		timeout := s.opts.commandTimeout()
		cs := &changeState{answered: map[uint32]*wire.FetchAttrs{}, fetching: true}
		err := fromWire(w.UIDFetchFlags(ctx, timeout, wire.FlagsFetch{
			Set: wire.WholeFolder, Items: reconcileItems(out.Mode, s.IdentityScheme()), ChangedSince: sinceModSeq, Vanished: out.Mode == QResync,
		}, cs.handle))
		if err != nil {
			return err
		}
		out.Commands++
		if out.Mode == CondStore {
			cs.fetching = false
			if err := fromWire(w.UIDSearch(ctx, timeout, wire.WholeFolder, cs.handle)); err != nil {
				return err
			}
			out.Commands++
			if cs.violation == nil && cs.searchAnswers == 0 {
				return fmt.Errorf("%w (UID SEARCH completed without a SEARCH response)", ErrIncompleteAnswer)
			}
			out.Existing = ranges(cs.existing.Normalize())
		}
		if cs.violation != nil {
			return cs.violation
		}
		out.Vanished = ranges(cs.vanished.Normalize())
		out.Changed = make([]FlagAnswer, 0, len(cs.answered))
		for _, a := range cs.answered {
			if !a.HasFlags {
				return fmt.Errorf("%w (a FETCH answer without FLAGS)", ErrIncompleteAnswer)
			}
			out.Changed = append(out.Changed, flagAnswerOf(a))
		}
		slices.SortFunc(out.Changed, func(a, b FlagAnswer) int { return cmpUID(a.UID, b.UID) })
		return nil
	})
	if err != nil {
		return FolderChanges{}, err
	}
	if !out.Narrowed {
		return out, nil
	}
	s.debug(ctx, "imap reconcile changes", slog.String("mode", out.Mode.String()),
		slog.Int("changed", len(out.Changed)), slog.Int("vanished_ranges", len(out.Vanished)),
		slog.Int("commands", out.Commands), slog.Duration("elapsed", time.Since(start)))
	return out, nil
}

func cmpUID(a, b uint32) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

func ranges(rs wire.UIDRanges) []UIDRange {
	out := make([]UIDRange, len(rs))
	for i, r := range rs {
		out[i] = UIDRange{First: r.Lo, Last: r.Hi}
	}
	return out
}

// changeState collects the answers of one ReconcileChanges.
type changeState struct {
	fetching      bool
	answered      map[uint32]*wire.FetchAttrs
	vanished      wire.UIDRanges
	existing      wire.UIDRanges
	searchAnswers int
	violation     error
}

func (cs *changeState) handle(r *wire.Response) {
	switch r.Kind {
	case wire.RespFetch:
		if !r.Fetch.HasUID || !cs.fetching {
			return // unsolicited, or about a message it does not identify
		}
		mergeFetch(cs.answered, r.Fetch)
	case wire.RespVanished:
		if r.Earlier && !cs.fetching {
			return
		}
		cs.vanished = append(cs.vanished, r.Set...)
	case wire.RespSearch, wire.RespESearch:
		if cs.fetching {
			return
		}
		if r.Kind == wire.RespESearch && !r.UIDResult {
			cs.violation = fmt.Errorf("imapx: UID SEARCH answered with sequence numbers: %w", ErrProtocolViolation)
			return
		}
		cs.searchAnswers++
		cs.existing = append(cs.existing, r.Set...)
	}
}
