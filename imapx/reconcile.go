package imapx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// FetchItem is the name of a FETCH data item (RFC 3501 §6.4.5).
type FetchItem string

// The data items the reconciliation pass may ask for.
const (
	FetchFlags FetchItem = "FLAGS"
	FetchUID   FetchItem = "UID"
	// FetchModSeq is the message's mod-sequence (RFC 7162 §3.1.4), asked for
	// in addition to ReconcileItems where CONDSTORE is in use.
	FetchModSeq FetchItem = "MODSEQ"
)

// ReconcileItems is the only message data Reconcile asks for: the flags and
// the UID, both answered from folder state, so that nothing it issues can
// set \Seen. Where CONDSTORE is in use FetchModSeq is added, on Gmail
// X-GM-LABELS (reconcileItems). (Any other item
// is refused by the command itself before it is sent.)
var ReconcileItems = [...]FetchItem{FetchFlags, FetchUID}

// reconcileItems returns the FETCH items for mode, as the reconciliation
// connection's UID FETCH takes them. On Gmail X-GM-LABELS is asked with
// FLAGS: a label change bumps the message's mod-sequence there, so a
// narrowed question describes it as it describes a flag change.
func reconcileItems(mode ReconcileMode, scheme IdentityScheme) []wire.FetchItem {
	items := make([]wire.FetchItem, 0, len(ReconcileItems)+2)
	for _, it := range ReconcileItems {
		items = append(items, wire.FetchItem(it))
	}
	if mode != Plain {
		items = append(items, wire.FetchItem(FetchModSeq))
	}
	if scheme == GmailIdentity {
		items = append(items, wire.FetchGmailLabels)
	}
	return items
}

// MaxReconcileWindow bounds the UIDs one Reconcile call takes.
const MaxReconcileWindow = 100_000

// ReconcileMode is the question Reconcile asks. It follows what the server
// advertises after authentication, so that a server that can say what
// changed is asked only about that.
type ReconcileMode int

const (
	// Plain: neither CONDSTORE nor QRESYNC. UID FETCH <window> (FLAGS UID);
	// silence is a deletion.
	Plain ReconcileMode = iota
	// CondStore: CONDSTORE without QRESYNC. UID SEARCH UID <window> says
	// which UIDs exist, then UID FETCH <window> (FLAGS UID MODSEQ)
	// (CHANGEDSINCE <modseq>) describes the changed ones.
	CondStore
	// QResync: CONDSTORE and QRESYNC, enabled on the connection. One
	// UID FETCH <window> (FLAGS UID MODSEQ) (CHANGEDSINCE <modseq> VANISHED)
	// describes the changed messages and reports the expunged ones as
	// VANISHED (EARLIER).
	QResync
)

func (m ReconcileMode) String() string {
	switch m {
	case Plain:
		return "plain"
	case CondStore:
		return "condstore"
	case QResync:
		return "qresync"
	}
	return fmt.Sprintf("ReconcileMode(%d)", int(m))
}

// modeFor is the mode a server's advertised capabilities allow.
func modeFor(caps imap.CapSet) ReconcileMode {
	switch {
	case caps.Has(imap.CapQResync) && caps.Has(imap.CapCondStore):
		return QResync
	case caps.Has(imap.CapCondStore):
		return CondStore
	}
	return Plain
}

// FlagAnswer is the server's description of one message.
type FlagAnswer struct {
	UID uint32
	// Flags are the message's flags as the server sent them, \Recent left
	// out; never nil. \Deleted is a flag like any other.
	Flags []string
	// ModSeq is the message's mod-sequence, 0 in Plain mode.
	ModSeq uint64
	// Labels are the message's X-GM-LABELS on Gmail (never nil there when
	// HasLabels), described with its flags.
	Labels    []string
	HasLabels bool
}

// ReconcileAnswer is what the server said about a window.
type ReconcileAnswer struct {
	// Mode is the question that was asked: ReconcileMode, lowered to Plain
	// for a folder without mod-sequences (NOMODSEQ).
	Mode ReconcileMode
	// Narrowed reports that CHANGEDSINCE was used: Changed then holds only
	// the messages that changed since sinceModSeq, and a present UID
	// without an entry there keeps the flags already stored. Without it
	// Changed describes every present UID.
	Narrowed bool
	// Present are the UIDs of the window that still exist, ascending.
	Present []uint32
	// Changed are the present UIDs whose flags the server described,
	// ascending by UID.
	Changed []FlagAnswer
	// Vanished are the UIDs of the window the folder no longer holds,
	// ascending: those a VANISHED response named, or, where the answer
	// itself establishes existence, those it was silent about. Present and
	// Vanished partition the window.
	Vanished []uint32
	// HighestModSeq is the folder's HIGHESTMODSEQ as the EXAMINE right
	// before the question reported it, 0 in Plain mode. Every change it
	// covers was visible to the question, so a reconciliation cycle that
	// begins with this answer may record it once every stored message has
	// been asked about since; one window alone covers only itself.
	HighestModSeq uint64
	// FetchResponses counts the FETCH responses the server sent during the
	// pass, solicited or not: a narrowed window on a quiet folder has none.
	FetchResponses int
}

// ReconcileMode returns the mode Reconcile uses. On a session of
// OpenReconcileSession it is what the server advertised after
// authentication (QResync needs QRESYNC, which implies CONDSTORE; CondStore
// needs CONDSTORE), lowered to CondStore once the connection is open if the
// server did not confirm ENABLE QRESYNC. A read session asks over its own
// connection, where QRESYNC is never enabled (go-imap could not read the
// VANISHED responses it brings), so its mode is CondStore at most.
// Reconcile lowers it further, to Plain, for a folder that reports
// NOMODSEQ; ReconcileAnswer.Mode says what was asked.
func (s *ReadSession) ReconcileMode() ReconcileMode {
	if s.reconcileOnly && s.wire != nil && s.wire.Usable() {
		return connMode(s.wire)
	}
	m := modeFor(s.caps)
	if m == QResync && !s.reconcileOnly {
		return CondStore
	}
	return m
}

// connMode is the mode of the reconciliation connection w: what its server
// advertised, lowered to CondStore unless it confirmed ENABLE QRESYNC.
func connMode(w *wire.Conn) ReconcileMode {
	m := modeFor(w.Caps())
	if m == QResync && !w.Enabled(string(imap.CapQResync)) {
		return CondStore
	}
	return m
}

// Reconcile asks the server about window, UIDs of the open folder under the
// UIDVALIDITY Examine reported, and returns which still exist, which flags
// they carry and which left the folder. sinceModSeq is the mod-sequence a
// previous pass recorded (0 for none): with CONDSTORE, only messages changed
// since then are described. The question depends on ReconcileMode:
//
//   - Plain: UID FETCH <window> (FLAGS UID). Silence is a deletion.
//   - QResync: UID FETCH <window> (FLAGS UID MODSEQ) (CHANGEDSINCE <m>
//     VANISHED); the VANISHED (EARLIER) report of the same command is what
//     says which UIDs left.
//   - CondStore: UID SEARCH UID <window> (RETURN (ALL) with ESEARCH) for
//     existence, then UID FETCH <window> (FLAGS UID MODSEQ) (CHANGEDSINCE <m>).
//
// With sinceModSeq 0, or above the folder's HIGHESTMODSEQ (a value the
// server cannot have produced in this UIDVALIDITY), every mode asks the
// whole window without CHANGEDSINCE, which answers existence by itself. The
// three reach the same Present, Vanished and flags.
//
// The questions go over the session's reconciliation connection (see
// reconcileOn): a read session's own connection, lent by go-imap between
// two of its commands, or the only connection of a session of
// OpenReconcileSession, which enables QRESYNC right after authentication
// when advertised. Either way the folder is EXAMINEd afresh for every call,
// so HighestModSeq is current, and the connection is sent only ENABLE,
// EXAMINE, UID FETCH of FLAGS, UID and MODSEQ, UID SEARCH and LOGOUT for
// it: nothing that changes a mailbox or sets \Seen. Long windows are split into several commands of at most about
// 8000 octets of compressed UID set (RFC 7162 §4); when the server reports
// an expunge by sequence number during the pass, one more UID SEARCH
// settles which present UIDs are still there.
//
// Errors: ErrNoFolder, ErrMailboxFolderRecreated (the folder now reports
// another UIDVALIDITY: nothing can be concluded, and the session refuses to
// search or fetch until the next Examine), ErrIncompleteAnswer (a FETCH
// response named a window UID without FLAGS, or a search went unanswered:
// terminal, nothing is concluded), *CommandError, and transient
// *TransportError (ErrMalformedResponse among its causes), after which
// Recover replaces both connections. window may be in any order and hold
// duplicates; a UID 0, or more than MaxReconcileWindow UIDs, is refused.
func (s *ReadSession) Reconcile(ctx context.Context, window []uint32, sinceModSeq uint64) (ReconcileAnswer, error) {
	if err := s.openFolder(); err != nil {
		return ReconcileAnswer{}, err
	}
	uids, err := normalizeWindow(window)
	if err != nil {
		return ReconcileAnswer{}, err
	}
	if len(uids) == 0 {
		// Nothing to ask: the folder's state is what Examine reported.
		ans := ReconcileAnswer{Mode: s.ReconcileMode(), Present: []uint32{}, Changed: []FlagAnswer{}, Vanished: []uint32{}}
		if ans.Mode != Plain {
			ans.HighestModSeq = s.state.HighestModSeq
		}
		return ans, nil
	}
	start := time.Now()
	var (
		ans      ReconcileAnswer
		commands = 1 // EXAMINE
	)
	err = s.reconcileOn(ctx, "reconcile", func(w *wire.Conn, st wire.ExamineData) error {
		mode := connMode(w)
		if mode != Plain && (st.NoModSeq || st.HighestModSeq == 0) {
			mode = Plain
		}
		since := sinceModSeq
		if mode == Plain || since > st.HighestModSeq {
			since = 0
		}
		timeout := s.opts.commandTimeout()
		rs := newReconcileState(uids)
		items := reconcileItems(mode, s.IdentityScheme())
		for _, ch := range wire.ChunkUIDs(uids, wire.MaxSetBytes) {
			rs.chunk(ch)
			if since > 0 && mode == CondStore {
				if err := rs.search(ctx, w, timeout, ch.Set); err != nil {
					return err
				}
				commands++
			}
			rs.phase = phaseFetch
			err := fromWire(w.UIDFetchFlags(ctx, timeout, wire.FlagsFetch{
				Set: ch.Set, Items: items, ChangedSince: since, Vanished: since > 0 && mode == QResync,
			}, rs.handle))
			if err != nil {
				return err
			}
			commands++
		}
		if err := rs.complete(); err != nil {
			return err
		}

		// Which UIDs exist.
		present := make([]uint32, 0, len(uids))
		for i, uid := range uids {
			if rs.gone[i] {
				continue
			}
			_, answered := rs.answered[uid]
			switch {
			case since == 0: // the fetch answers for every UID that exists
				if !answered {
					continue
				}
			case mode == CondStore:
				if !rs.exists[i] && !answered {
					continue
				}
			}
			present = append(present, uid)
		}
		if rs.seqExpunges > 0 {
			// The server removed messages during the pass and said so by
			// sequence number: ask which of the present UIDs are still there.
			var err error
			if present, err = s.existing(ctx, w, present); err != nil {
				return err
			}
			commands++
		}

		ans = ReconcileAnswer{
			Mode:           mode,
			Narrowed:       since > 0,
			Present:        present,
			Changed:        make([]FlagAnswer, 0, len(rs.answered)),
			Vanished:       make([]uint32, 0, len(uids)-len(present)),
			FetchResponses: rs.fetches,
		}
		if mode != Plain {
			ans.HighestModSeq = st.HighestModSeq
		}
		for _, uid := range uids {
			if _, ok := slices.BinarySearch(present, uid); !ok {
				ans.Vanished = append(ans.Vanished, uid)
			}
		}
		for _, uid := range present {
			if a, ok := rs.answered[uid]; ok {
				ans.Changed = append(ans.Changed, flagAnswerOf(a))
			}
		}
		return nil
	})
	if err != nil {
		return ReconcileAnswer{}, err
	}
	s.debug(ctx, "imap reconcile", slog.String("mode", ans.Mode.String()), slog.Bool("narrowed", ans.Narrowed),
		slog.Int("window", len(uids)), slog.Int("present", len(ans.Present)), slog.Int("changed", len(ans.Changed)),
		slog.Int("vanished", len(ans.Vanished)), slog.Int("commands", commands),
		slog.Duration("elapsed", time.Since(start)))
	return ans, nil
}

// ExistingUIDs returns which of uids the open folder still holds, ascending,
// from UID SEARCH UID <set> on the reconciliation connection: identifiers
// only, no message data. It is how a caller confirms a disappearance before
// acting on it (the misreport guard), independently of the VANISHED report
// or the silence Reconcile concluded it from. The folder is examined afresh
// first; errors are those of Reconcile.
func (s *ReadSession) ExistingUIDs(ctx context.Context, uids []uint32) ([]uint32, error) {
	if err := s.openFolder(); err != nil {
		return nil, err
	}
	window, err := normalizeWindow(uids)
	if err != nil {
		return nil, err
	}
	if len(window) == 0 {
		return nil, nil
	}
	var existing []uint32
	err = s.reconcileOn(ctx, "UID SEARCH", func(w *wire.Conn, _ wire.ExamineData) error {
		var err error
		existing, err = s.existing(ctx, w, window)
		return err
	})
	return existing, err
}

// existing runs the UID SEARCH of ExistingUIDs on sorted, distinct uids in
// the folder open on w.
func (s *ReadSession) existing(ctx context.Context, w *wire.Conn, uids []uint32) ([]uint32, error) {
	rs := newReconcileState(uids)
	for _, ch := range wire.ChunkUIDs(uids, wire.MaxSetBytes) {
		rs.chunk(ch)
		if err := rs.search(ctx, w, s.opts.commandTimeout(), ch.Set); err != nil {
			return nil, err
		}
	}
	if err := rs.complete(); err != nil {
		return nil, err
	}
	out := make([]uint32, 0, len(uids))
	for i, uid := range uids {
		if rs.exists[i] && !rs.gone[i] {
			out = append(out, uid)
		}
	}
	return out, nil
}

// reconcileOn runs f on the session's reconciliation connection with the
// session's folder freshly examined on it, and refuses a folder whose
// UIDVALIDITY is no longer the one the session examined. The connection is
// the session's own (onOwnConnection): go-imap's, lent between two of its
// commands, so a window asked on a read session — the one a folder pass
// read new mail with, say — costs the server no other login; or the only
// connection of a session of OpenReconcileSession. name names the command
// in a failure.
func (s *ReadSession) reconcileOn(ctx context.Context, name string, f func(w *wire.Conn, st wire.ExamineData) error) error {
	return s.onOwnConnection(ctx, name, func(w *wire.Conn, _ func()) error {
		st, err := w.Examine(ctx, s.opts.commandTimeout(), s.folder, connMode(w) == CondStore)
		if err != nil {
			return fromWire(err)
		}
		if st.UIDValidity != s.state.UIDValidity {
			s.recreated = true
			return ErrMailboxFolderRecreated
		}
		return f(w, st)
	})
}

// reconcileConn returns the only connection of a session of
// OpenReconcileSession, opening it on first use: established and
// authenticated exactly like a read session's, then, when the server advertises QRESYNC, ENABLE QRESYNC as its first
// command, before any folder is opened (RFC 7162 §3.2.3). A server that
// refuses it leaves the connection in CondStore mode.
func (s *ReadSession) reconcileConn(ctx context.Context) (*wire.Conn, error) {
	if s.wire != nil {
		if !s.wire.Usable() {
			return nil, &TransportError{Op: "reconcile", Err: wire.ErrConnectionUnusable}
		}
		return s.wire, nil
	}
	start := time.Now()
	w, tls, err := dialWire(ctx, s.ep, s.opts)
	if err != nil {
		return nil, err
	}
	if modeFor(w.Caps()) == QResync {
		// Enabled remembers whether the server confirmed it; a refusal
		// (*CommandError) leaves the connection usable in CondStore mode.
		_, err := w.Enable(ctx, s.opts.commandTimeout(), string(imap.CapQResync))
		err = fromWire(err)
		var cmdErr *CommandError
		if err != nil && !errors.As(err, &cmdErr) {
			w.Shutdown()
			return nil, err
		}
	}
	s.wire = w
	s.debug(ctx, "imap reconciliation connection", slog.String("mode", connMode(w).String()),
		slog.Bool("tls", tls), slog.Duration("elapsed", time.Since(start)))
	return w, nil
}

// normalizeWindow sorts and deduplicates window, refusing UID 0 and windows
// above MaxReconcileWindow.
func normalizeWindow(window []uint32) ([]uint32, error) {
	if len(window) > MaxReconcileWindow {
		return nil, fmt.Errorf("imapx: a reconciliation window of %d UIDs exceeds %d", len(window), MaxReconcileWindow)
	}
	uids := slices.Clone(window)
	slices.Sort(uids)
	uids = slices.Compact(uids)
	if len(uids) > 0 && uids[0] == 0 {
		return nil, errors.New("imapx: UID 0 in a reconciliation window")
	}
	return uids, nil
}

// phase says which command's answer reconcileState is collecting.
type phase int

const (
	phaseFetch phase = iota
	phaseSearch
)

// reconcileState collects the answers to the commands of one pass.
type reconcileState struct {
	window []uint32 // sorted, distinct
	phase  phase
	// The current command's chunk of the window: uids[offset:offset+len(cur)].
	cur    []uint32
	offset int

	answered map[uint32]*wire.FetchAttrs // window UIDs a FETCH response described
	exists   []bool                      // by window index: a search named it
	gone     []bool                      // by window index: a VANISHED named it

	fetches       int // FETCH responses, any UID
	searchAnswers int // SEARCH/ESEARCH responses of the current search
	seqExpunges   int // EXPUNGE responses: some message left, UID unknown
	violation     error
}

func newReconcileState(window []uint32) *reconcileState {
	return &reconcileState{
		window:   window,
		answered: map[uint32]*wire.FetchAttrs{},
		exists:   make([]bool, len(window)),
		gone:     make([]bool, len(window)),
	}
}

// chunk makes ch, a contiguous part of the window, the current one.
func (rs *reconcileState) chunk(ch wire.Chunk) {
	i, _ := slices.BinarySearch(rs.window, ch.UIDs[0])
	rs.cur, rs.offset = ch.UIDs, i
}

// search runs the UID SEARCH of the current chunk and checks it was
// answered.
func (rs *reconcileState) search(ctx context.Context, w *wire.Conn, timeout time.Duration, set string) error {
	rs.phase, rs.searchAnswers = phaseSearch, 0
	if err := w.UIDSearch(ctx, timeout, set, rs.handle); err != nil {
		return fromWire(err)
	}
	if rs.violation != nil {
		return rs.violation
	}
	if rs.searchAnswers == 0 {
		return fmt.Errorf("%w (UID SEARCH completed without a SEARCH response)", ErrIncompleteAnswer)
	}
	return nil
}

// handle takes one untagged response of any command of the pass.
func (rs *reconcileState) handle(r *wire.Response) {
	switch r.Kind {
	case wire.RespFetch:
		rs.fetches++
		if rs.phase != phaseFetch || !r.Fetch.HasUID {
			return // unsolicited, about a message it does not identify
		}
		if _, ok := slices.BinarySearch(rs.window, r.Fetch.UID); !ok {
			return
		}
		mergeFetch(rs.answered, r.Fetch)
	case wire.RespVanished:
		if r.Earlier && rs.phase != phaseFetch {
			return
		}
		// VANISHED (EARLIER) answers the UID FETCH ... VANISHED; a plain
		// VANISHED is an expunge happening now (RFC 7162 §3.2.10). Both
		// name UIDs that are gone.
		set := r.Set.Normalize()
		for i, uid := range rs.window {
			if set.Contains(uid) {
				rs.gone[i] = true
			}
		}
	case wire.RespExpunge:
		rs.seqExpunges++
	case wire.RespSearch, wire.RespESearch:
		if rs.phase != phaseSearch {
			return
		}
		if r.Kind == wire.RespESearch && !r.UIDResult {
			rs.violation = fmt.Errorf("imapx: UID SEARCH answered with sequence numbers: %w", ErrProtocolViolation)
			return
		}
		rs.searchAnswers++
		set := r.Set.Normalize()
		for j, uid := range rs.cur {
			if set.Contains(uid) {
				rs.exists[rs.offset+j] = true
			}
		}
	}
}

// complete refuses an answer that named a window UID without its FLAGS.
func (rs *reconcileState) complete() error {
	if rs.violation != nil {
		return rs.violation
	}
	missing := 0
	for _, a := range rs.answered {
		if !a.HasFlags {
			missing++
		}
	}
	if missing > 0 {
		return fmt.Errorf("%w (%d FETCH answers without FLAGS)", ErrIncompleteAnswer, missing)
	}
	return nil
}

// mergeFetch records what one FETCH response says of a message in
// answered, keyed by UID. A server may split one message's items over
// several responses, so an item a later response carries is added to what
// earlier ones said; an item it lacks leaves the earlier value.
func mergeFetch(answered map[uint32]*wire.FetchAttrs, f wire.FetchAttrs) {
	a := answered[f.UID]
	if a == nil {
		a = &wire.FetchAttrs{UID: f.UID}
		answered[f.UID] = a
	}
	if f.HasFlags {
		a.Flags, a.HasFlags = f.Flags, true
	}
	if f.HasModSeq {
		a.ModSeq, a.HasModSeq = f.ModSeq, true
	}
	if f.HasLabels {
		a.Labels, a.HasLabels = f.Labels, true
	}
	if f.Identity.EmailID != "" {
		a.Identity.EmailID = f.Identity.EmailID
	}
	if f.Identity.ThreadID != "" {
		a.Identity.ThreadID = f.Identity.ThreadID
	}
}

// flagAnswerOf is what a merged FETCH answer says of one message.
func flagAnswerOf(a *wire.FetchAttrs) FlagAnswer {
	return FlagAnswer{UID: a.UID, Flags: a.Flags, ModSeq: a.ModSeq, Labels: a.Labels, HasLabels: a.HasLabels}
}
