package imapx

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
	"github.com/mailfathom/mailfathom/internal/failure"
)

// ErrSubscriptionDeclined is returned by Subscribe when the server answered
// NOTIFY SET with NO or BAD: it will not watch these folders through one
// subscription (RFC 5465 §3.1, §5.7, §5.8). The connection stays usable,
// with the first folder open, so the caller may still watch that one.
var ErrSubscriptionDeclined = failure.New("MailboxSubscriptionDeclined", "imapx: the server declined the push subscription")

// WatchSession is a connection that watches folders for changes and does
// nothing else. After the authentication every connection runs (the same
// dial, TLS policy and credential handling as OpenReadSession), it sends
// only EXAMINE, NOTIFY, IDLE, DONE and LOGOUT: it has no operation that
// fetches a body, an envelope or flags, none that opens a folder
// read-write, and none that stores, copies, moves or expunges. What a
// server reports while it waits is read for which folder changed and
// dropped (see Wait).
//
// A WatchSession is driven by one goroutine. After a failure its
// connection is unusable and every operation fails fast; the caller closes
// it and opens another, so a retry always starts from a connection it
// established itself.
type WatchSession struct {
	accountID string
	opts      SessionOptions
	log       *slog.Logger
	w         *wire.Conn
	folders   []string
}

// OpenWatchSession connects to ep and authenticates, exactly as
// OpenReadSession does, and fails the same ways. No folder is open;
// Capabilities says what the server advertised on this connection.
func OpenWatchSession(ctx context.Context, ep Endpoint, opts SessionOptions) (*WatchSession, error) {
	start := time.Now()
	w, tls, err := dialWire(ctx, ep, opts)
	if err != nil {
		return nil, err
	}
	s := &WatchSession{accountID: ep.AccountID, opts: opts, log: opts.logger(), w: w}
	s.log.LogAttrs(ctx, slog.LevelDebug, "imap watch connected",
		slog.String("account", ep.AccountID), slog.Bool("tls", tls), slog.Duration("elapsed", time.Since(start)))
	return s, nil
}

// Capabilities returns what the server advertised after authentication on
// this connection. It is never remembered across connections: a server
// that gains or loses an extension across a restart is followed.
func (s *WatchSession) Capabilities() imap.CapSet { return s.w.Caps().Copy() }

// CanSubscribe reports whether the server advertised both NOTIFY
// (RFC 5465) and IDLE (RFC 2177): one without the other cannot watch a
// folder that is not open.
func (s *WatchSession) CanSubscribe() bool {
	caps := s.w.Caps()
	return caps.Has(imap.CapIdle) && caps.Has(imap.Cap("NOTIFY"))
}

// CanIdle reports whether the server advertised IDLE (RFC 2177).
func (s *WatchSession) CanIdle() bool { return s.w.Caps().Has(imap.CapIdle) }

// Subscribe watches folders, paths as ListFolders reports them, through
// one subscription: it opens the first with EXAMINE (RFC 3501 §6.3.2),
// which IDLE needs a folder for and which changes nothing, and names the
// rest in NOTIFY SET (RFC 5465 §3.1). It does not check the capabilities;
// CanSubscribe does.
//
// It returns each folder's state as the server described it when the
// subscription began, by path: the first folder's from its EXAMINE, the
// others' from the STATUS responses the STATUS indicator of NOTIFY SET asks
// for (§3.1), which read nothing of a message and open no folder — or, for
// the first, no UIDNEXT when it changed between its EXAMINE and the
// subscription, since the server reported that change with NOTIFY's answer
// and will not again. A folder the server did not describe is missing.
// The states are for a caller to compare with what it last observed; the
// reports Wait returns carry none.
//
// A NOTIFY the server answers with NO or BAD is ErrSubscriptionDeclined,
// wrapping the *CommandError; a folder that cannot be opened is a
// *CommandError; a failed connection a transient *TransportError.
func (s *WatchSession) Subscribe(ctx context.Context, folders []string) (map[string]FolderState, error) {
	if len(folders) == 0 {
		return nil, errors.New("imapx: a subscription names at least one folder")
	}
	first, err := s.WatchFolder(ctx, folders[0])
	if err != nil {
		return nil, err
	}
	described, selectedChanged, err := s.w.NotifySet(ctx, s.opts.commandTimeout(), folders[1:], len(folders) > 1)
	err = fromWire(err)
	var cmd *CommandError
	if errors.As(err, &cmd) {
		return nil, fmt.Errorf("%w: %w", ErrSubscriptionDeclined, err)
	}
	if err != nil {
		return nil, err
	}
	if selectedChanged {
		// The open folder changed before the subscription took hold: what
		// EXAMINE said of it is out of date, and no report will follow. A
		// state without UIDNEXT says nothing of new mail.
		first.UIDNext = 0
	}
	states := map[string]FolderState{folders[0]: first}
	for _, path := range folders[1:] {
		for name, d := range described {
			if name == path || (name == "INBOX" && strings.EqualFold(path, name)) {
				states[path] = folderState(path, d)
				break
			}
		}
	}
	s.folders = append([]string(nil), folders...)
	return states, nil
}

// WatchFolder watches the one folder path, opened with EXAMINE, for the
// changes IDLE reports about an open folder, and returns the folder's
// state as EXAMINE reported it. Errors are Subscribe's, less the declined
// subscription.
func (s *WatchSession) WatchFolder(ctx context.Context, path string) (FolderState, error) {
	s.folders = nil
	// EXAMINE with CONDSTORE enables it for the connection (RFC 7162
	// §3.1), so that a subscription's report of a flag change in another
	// folder moves that folder's HIGHESTMODSEQ (RFC 5465 §5.3), the one
	// thing a flag change moves when the unread count stays; it also has
	// the server report the folder's own HIGHESTMODSEQ, as a read
	// session's EXAMINE does.
	condstore := s.w.Caps().Has(imap.CapCondStore)
	d, err := s.w.Examine(ctx, s.opts.commandTimeout(), path, condstore)
	if err != nil {
		return FolderState{}, fromWire(err)
	}
	s.folders = []string{path}
	return folderState(path, d), nil
}

func folderState(path string, d wire.ExamineData) FolderState {
	return FolderState{Path: path, UIDValidity: d.UIDValidity, UIDNext: d.UIDNext, Exists: d.Exists, HighestModSeq: d.HighestModSeq}
}

// Wait runs one IDLE command (RFC 2177 §3) for at most renewal and returns
// the watched folders the server reported a change in, each once; none
// when renewal passed quietly, after which the next Wait re-issues IDLE on
// the same connection. A report about a folder the session does not watch
// is dropped. Only which folder changed comes out: no count, UID or flag.
//
// A server that answers nothing after DONE within the command timeout, a
// BYE, a cut connection or a NOTIFICATIONOVERFLOW is a transient
// *TransportError, after which the session is unusable; ctx ending returns
// its error, wrapped, and also leaves it unusable.
func (s *WatchSession) Wait(ctx context.Context, renewal time.Duration) ([]string, error) {
	if len(s.folders) == 0 {
		return nil, ErrNoFolder
	}
	changed, err := s.w.Idle(ctx, s.opts.commandTimeout(), renewal)
	if err != nil {
		return nil, fromWire(err)
	}
	out := changed[:0]
	for _, f := range changed {
		for _, w := range s.folders {
			if w == f || (f == "INBOX" && strings.EqualFold(w, f)) {
				out = append(out, f)
				break
			}
		}
	}
	return out, nil
}

// Usable reports whether the connection can take another command.
func (s *WatchSession) Usable() bool { return s.w.Usable() }

// Abandon ends the session without a word to the server: the socket is
// closed and no LOGOUT is sent. It is for a session nobody is going to use
// — one an abandoned establishment attempt opened — where a LOGOUT would
// be a command a server that stopped answering could hold past any budget.
func (s *WatchSession) Abandon() { s.w.Shutdown() }

// Close ends the session with LOGOUT when its connection is usable, bounded
// by the command timeout, and closes the socket either way. Calling it
// again returns nil.
func (s *WatchSession) Close() error {
	return fromWire(s.w.Close(s.opts.commandTimeout()))
}
