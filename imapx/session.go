package imapx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// ReadSession is a read-only IMAP session: one authenticated connection with
// at most one folder open, and that one opened with EXAMINE. Reconcile and
// the questions beside it are asked over the same connection (see
// reconcileOn); OpenReconcileSession opens a session whose one connection
// is the wire layer's, with QRESYNC enabled. It has no
// operation that stores flags, copies, moves, expunges, appends or opens a
// folder read-write, and it fetches content only with BODY.PEEK, so nothing
// it does can set \Seen or change a mailbox.
//
// A ReadSession is not safe for concurrent use: one goroutine drives it.
//
// After a transient failure (IsTransient) its connection is unusable and
// every operation fails fast until Recover replaces it.
type ReadSession struct {
	ep   Endpoint
	opts SessionOptions
	log  *slog.Logger

	cn   *conn
	caps imap.CapSet
	// wire is the only connection of a session of OpenReconcileSession
	// (reconcile_session.go); nil on a read session.
	wire *wire.Conn
	// reconcileOnly marks a session of OpenReconcileSession: cn stays nil
	// and wire is its only connection.
	reconcileOnly bool

	// The open folder. state is what the folder reported when Examine
	// opened it; Recover compares against it.
	folder    string
	state     FolderState
	recreated bool
}

// Folder is one selectable folder the server lists.
type Folder struct {
	// Path is the mailbox name exactly as the server listed it (decoded from
	// modified UTF-7), surrounding whitespace included.
	Path string
	// Delimiter is the hierarchy delimiter, "" when the server has none.
	Delimiter string
	// Attributes are the LIST attributes, e.g. `\Sent`, `\HasNoChildren`.
	Attributes []string
}

// FolderState is what EXAMINE reported about a folder.
type FolderState struct {
	Path        string
	UIDValidity uint32
	// UIDNext is 0 when the server did not report it.
	UIDNext uint32
	// Exists is the number of messages.
	Exists uint32
	// HighestModSeq is 0 unless the server supports CONDSTORE.
	HighestModSeq uint64
}

// OpenReadSession connects to ep, protects the connection as ep.Security
// says, and authenticates. The returned session has no folder open.
//
// Failures: a rejected credential is an *AuthenticationError, an
// authentication exchange the client broke off an
// *AuthenticationExchangeError, a refused certificate or handshake a
// *TLSError, a missing STARTTLS
// ErrStartTLSUnavailable, a STARTTLS the server advertised but refused a
// *CommandError, no usable login ErrLoginDisabled (all terminal); a network
// failure, a BYE greeting or a timeout is a transient *TransportError. A
// server that throttles — a BYE greeting, or a NO to the login, that says
// so — is a *ThrottledError, never a rejected credential.
func OpenReadSession(ctx context.Context, ep Endpoint, opts SessionOptions) (*ReadSession, error) {
	s := &ReadSession{ep: ep, opts: opts, log: opts.logger()}
	if err := s.connect(ctx); err != nil {
		return nil, err
	}
	return s, nil
}

func (s *ReadSession) connect(ctx context.Context) error {
	if s.reconcileOnly {
		return s.connectReconcileOnly(ctx)
	}
	start := time.Now()
	cn, caps, err := dialRead(ctx, s.ep, s.opts)
	if err != nil {
		s.log.LogAttrs(ctx, slog.LevelDebug, "imap connect failed",
			slog.String("account", s.ep.AccountID), slog.Bool("transient", IsTransient(err)))
		return err
	}
	s.cn, s.caps = cn, caps
	s.log.LogAttrs(ctx, slog.LevelDebug, "imap connected",
		slog.String("account", s.ep.AccountID), slog.Bool("tls", cn.tls), slog.Bool("compressed", cn.compression.InUse),
		slog.Duration("elapsed", time.Since(start)))
	return nil
}

// Capabilities returns what the server advertised after authentication.
func (s *ReadSession) Capabilities() imap.CapSet {
	return s.caps.Copy()
}

// run executes one command on the current connection under a watchdog. f
// gets the watchdog so streaming commands can exclude the caller's time and
// count progress. The returned error is classified: the caller's context
// error, a *CommandError (connection still usable) or a *TransportError
// (connection now unusable).
func (s *ReadSession) run(ctx context.Context, name string, f func(c *imapclient.Client, w *wire.Watchdog) error) error {
	if s.reconcileOnly {
		return ErrReconcileOnly
	}
	cn := s.cn
	if cn == nil {
		return &TransportError{Op: name, Err: wire.ErrNotConnected}
	}
	if cn.sock.Broken() {
		return &TransportError{Op: name, Err: wire.ErrConnectionUnusable}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("imapx: %s: %w", name, err)
	}
	w := wire.StartWatchdog(ctx, cn.sock, s.opts.commandTimeout())
	err := f(cn.client, w)
	reason := w.Stop()
	if err == nil {
		return nil
	}
	var ownErr *callerError
	if errors.As(err, &ownErr) {
		return ownErr.err
	}
	if ctx.Err() != nil && reason != nil {
		return fmt.Errorf("imapx: %s: %w", name, ctx.Err())
	}
	if reason != nil {
		return &TransportError{Op: name, Err: wire.ErrTimedOut}
	}
	classified, lost := cn.classify(name, err)
	if lost {
		cn.kill()
	}
	return classified
}

// callerError carries an error of the caller's callback, or one this package
// made up itself, through run unchanged.
type callerError struct{ err error }

func (e *callerError) Error() string { return e.err.Error() }

func (s *ReadSession) debug(ctx context.Context, msg string, attrs ...slog.Attr) {
	s.log.LogAttrs(ctx, slog.LevelDebug, msg, append([]slog.Attr{slog.String("account", s.ep.AccountID)}, attrs...)...)
}

// Examine opens path read-only (EXAMINE, with CONDSTORE when the server
// supports it) and returns its state. The session remembers the folder for
// Recover. If EXAMINE fails, no folder is open afterwards.
func (s *ReadSession) Examine(ctx context.Context, path string) (FolderState, error) {
	s.folder, s.state, s.recreated = "", FolderState{}, false
	st, err := s.examine(ctx, path)
	if err != nil {
		return FolderState{}, err
	}
	s.folder, s.state = path, st
	return st, nil
}

func (s *ReadSession) examine(ctx context.Context, path string) (FolderState, error) {
	start := time.Now()
	if s.reconcileOnly {
		st, err := s.examineReconcileOnly(ctx, path)
		if err == nil {
			s.debug(ctx, "imap examine", slog.Uint64("exists", uint64(st.Exists)), slog.Duration("elapsed", time.Since(start)))
		}
		return st, err
	}
	var data *imap.SelectData
	err := s.run(ctx, "EXAMINE", func(c *imapclient.Client, _ *wire.Watchdog) error {
		var err error
		data, err = c.Select(path, &imap.SelectOptions{
			ReadOnly:  true,
			CondStore: s.caps.Has(imap.CapCondStore),
		}).Wait()
		return err
	})
	if err != nil {
		return FolderState{}, err
	}
	if data.UIDValidity == 0 {
		return FolderState{}, fmt.Errorf("imapx: EXAMINE reported no UIDVALIDITY: %w", ErrProtocolViolation)
	}
	st := FolderState{
		Path:          path,
		UIDValidity:   data.UIDValidity,
		UIDNext:       uint32(data.UIDNext),
		Exists:        data.NumMessages,
		HighestModSeq: data.HighestModSeq,
	}
	s.debug(ctx, "imap examine", slog.Uint64("exists", uint64(st.Exists)), slog.Duration("elapsed", time.Since(start)))
	return st, nil
}

// openFolder checks that a folder is open and usable for search and fetch.
func (s *ReadSession) openFolder() error {
	if s.recreated {
		return ErrMailboxFolderRecreated
	}
	if s.folder == "" {
		return ErrNoFolder
	}
	return nil
}

// Recover replaces the connection after a failure: it closes the current one
// without LOGOUT (a server that stopped answering could hold a LOGOUT for as
// long as it likes), opens a new one with a freshly resolved password, and
// re-examines the folder that was open, read-only like every EXAMINE here.
// A session of OpenReconcileSession replaces its one connection the same
// way.
//
// If the folder now reports another UIDVALIDITY, Recover returns
// ErrMailboxFolderRecreated together with the new state, and the session
// refuses to search or fetch until the next Examine. With no folder open it
// only reconnects and returns a zero FolderState. When Recover fails it can
// be called again.
func (s *ReadSession) Recover(ctx context.Context) (FolderState, error) {
	if s.cn != nil {
		s.cn.shutdown()
		s.cn = nil
	}
	if s.wire != nil {
		// Reopened by the next Reconcile.
		s.wire.Shutdown()
		s.wire = nil
	}
	if err := s.connect(ctx); err != nil {
		return FolderState{}, err
	}
	s.debug(ctx, "imap recovered connection")
	if s.folder == "" {
		return FolderState{}, nil
	}
	st, err := s.examine(ctx, s.folder)
	if err != nil {
		return FolderState{}, err
	}
	if st.UIDValidity != s.state.UIDValidity {
		s.recreated = true
		return st, ErrMailboxFolderRecreated
	}
	s.recreated = false
	return st, nil
}

// logoutTimeout bounds the LOGOUT of Close.
const logoutTimeout = 10 * time.Second

// Close ends the session: with LOGOUT when the connection is healthy (bounded
// by CommandTimeout, at most 10 s), otherwise by closing the socket.
//
// Close reports only its own cleanup failure, which is never more important
// than a failure the caller already has: keep that one, for example with
// `if cerr := s.Close(); err == nil { err = cerr }`. A failed LOGOUT is
// ordinary after a server has gone away, so callers usually just log it.
// Calling Close again returns nil.
func (s *ReadSession) Close() error {
	var wireErr error
	if w := s.wire; w != nil {
		s.wire = nil
		wireErr = fromWire(w.Close(min(s.opts.commandTimeout(), logoutTimeout)))
	}
	err := s.closeMain()
	if err == nil {
		err = wireErr
	}
	return err
}

// Abandon ends the session without a word to the server: its sockets are
// closed and no LOGOUT is sent. It is for a session nobody is going to
// use — one an abandoned attempt opened — where a LOGOUT would be a
// command that a server that stopped answering could hold far past any
// budget.
func (s *ReadSession) Abandon() {
	if w := s.wire; w != nil {
		s.wire = nil
		w.Shutdown()
	}
	if cn := s.cn; cn != nil {
		s.cn = nil
		cn.shutdown()
	}
}

func (s *ReadSession) closeMain() error {
	cn := s.cn
	s.cn = nil
	if cn == nil {
		return nil
	}
	defer cn.shutdown()
	if cn.sock.Broken() {
		return nil
	}
	opts := s.opts
	opts.CommandTimeout = min(opts.commandTimeout(), logoutTimeout)
	w := wire.StartWatchdog(context.Background(), cn.sock, opts.CommandTimeout)
	err := cn.client.Logout().Wait()
	reason := w.Stop()
	switch {
	case err == nil:
		return nil
	case reason != nil:
		return &TransportError{Op: "LOGOUT", Err: wire.ErrTimedOut}
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		// The server closed the connection after BYE, before its tagged OK.
		return nil
	}
	classified, _ := classify("LOGOUT", err)
	return classified
}
