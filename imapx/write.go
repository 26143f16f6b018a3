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
	"github.com/mailfathom/mailfathom/internal/failure"
)

// WriteConnection is the one connection of an account able to change the
// mailbox. It is a type of its own, opened only by OpenWriteConnection:
// a ReadSession has no field, method or conversion that yields one, and a
// WriteConnection yields no ReadSession, so code that holds a read session
// cannot change a mailbox — the compiler, not a convention, keeps
// synchronization and content retrieval from setting \Seen.
//
// It sends only SELECT, UID MOVE (RFC 6851), UID COPY, UID STORE of one
// flag with .SILENT and UID EXPUNGE (RFC 4315 §2.1), each for one UID,
// UID SEARCH UID of one UID (Holds) and NOOP (RFC 3501 §6.1.2), which
// change nothing, and LOGOUT. It never sends a plain EXPUNGE, which
// would also remove messages the mailbox owner flagged \Deleted in their
// own client, and never lets go-imap's Move fall back, as it does where it
// sees no MOVE, to COPY, STORE and a plain EXPUNGE: a relocation without
// MOVE is composed by the caller from Copy, StoreFlags and ExpungeUID, so
// each step can be recorded before the next is issued.
//
// Every command that fails before any of its bytes was written to the
// connection fails with an *UnsentError: the server cannot have received
// it, so it may be issued again, even a MOVE or a COPY. A MOVE or COPY
// whose bytes were written and whose answer was never read is a
// *PlacementUnknownError instead.
//
// A WriteConnection is not safe for concurrent use, and holds at most one
// folder selected, read-write. It does not reconnect: once Usable reports
// false, or Noop fails, it is unusable, and the caller opens another.
type WriteConnection struct {
	ep   Endpoint
	opts SessionOptions
	log  *slog.Logger

	cn   *conn
	caps imap.CapSet
	// lastUsed is when the connection last carried a command (or was
	// opened), for IdleFor.
	lastUsed time.Time

	folder      string
	uidValidity uint32
}

// ErrNoSafeWay is a change the server offers no safe way to carry: a
// relocation on a server with neither MOVE nor UIDPLUS, or a delete on a
// server without UIDPLUS (UID EXPUNGE is the only expunge that cannot
// remove a message the owner flagged \Deleted). Nothing was sent. It is
// terminal: every later attempt would get the same answer.
var ErrNoSafeWay = failure.New("MailboxChangeNotSafelyPossible", "imapx: the server offers no safe way to make this change (neither MOVE nor UIDPLUS)")

// ErrDestinationMissing is a placement the server refused because the
// destination folder does not exist (NO [TRYCREATE], RFC 3501 §6.4.7). It
// is terminal.
var ErrDestinationMissing = failure.New("MailboxDestinationMissing", "imapx: the destination folder does not exist")

// PlacementUnknownError is a MOVE or COPY whose answer was never read: the
// connection failed after the command's bytes were written to it, so the
// command may have reached the server. Whether it ran is unknown, so it
// must never be issued again — by the caller, a retry policy or anything
// else — and IsTransient is false for it. A placement that failed before
// any of its bytes was written is an *UnsentError instead.
type PlacementUnknownError struct {
	Command string // "UID MOVE" or "UID COPY"
	cause   error
}

func (e *PlacementUnknownError) Error() string {
	return failure.Text("imapx: "+e.Command+" was sent and its answer never read: "+wire.TransportKind(e.cause), e.Identity())
}

// Identity implements failure.Named.
func (e *PlacementUnknownError) Identity() string { return "MailboxChangeOutcomeUnknown" }

// UnsentError is a command of the write connection that failed before any
// of its bytes was written to the connection: the connection was already
// closed — by the server, the network, or an earlier failure — or the
// caller's context had ended, or the write itself failed at its first
// byte. The server cannot have received the command, so issuing it again,
// on another connection, is safe even for a MOVE or a COPY.
//
// Err is what stopped it: a *TransportError, whose connection is unusable
// afterwards, or the caller's context error (wrapped). IsTransient, the
// failure's identity and errors.Is look through to Err.
type UnsentError struct {
	Command string // e.g. "UID MOVE", "read-write SELECT"
	Err     error
}

func (e *UnsentError) Error() string {
	var trErr *TransportError
	if errors.As(e.Err, &trErr) {
		return failure.Text("imapx: "+e.Command+" was not sent: "+wire.TransportKind(trErr.Err), trErr.Identity())
	}
	return "imapx: " + e.Command + " was not sent: " + e.Err.Error()
}

func (e *UnsentError) Unwrap() error { return e.Err }

// NotSent reports whether err is or wraps an *UnsentError: a write command
// none of whose bytes reached the connection.
func NotSent(err error) bool {
	_, ok := errors.AsType[*UnsentError](err)
	return ok
}

// Placement is what a MOVE or COPY answered: the UIDVALIDITY of the
// destination folder and the UID the message got there (COPYUID, RFC 4315
// §3). Both are 0 when the server named no placement.
type Placement struct {
	UIDValidity uint32
	UID         uint32
}

// OpenWriteConnection connects and authenticates exactly as
// OpenReadSession does. No folder is selected.
func OpenWriteConnection(ctx context.Context, ep Endpoint, opts SessionOptions) (*WriteConnection, error) {
	w := &WriteConnection{ep: ep, opts: opts, log: opts.logger()}
	cn, caps, err := dial(ctx, ep, opts)
	if err != nil {
		return nil, err
	}
	w.cn, w.caps, w.lastUsed = cn, caps, time.Now()
	w.debug(ctx, "imap write connection opened")
	return w, nil
}

// CanMove reports whether the server advertised MOVE (RFC 6851) or
// IMAP4rev2 when this connection was established, after authentication.
func (w *WriteConnection) CanMove() bool { return w.caps.Has(imap.CapMove) }

// CanExpungeUID reports whether the server advertised UIDPLUS (RFC 4315)
// or IMAP4rev2 when this connection was established, without which no
// expunge is safe.
func (w *WriteConnection) CanExpungeUID() bool { return w.caps.Has(imap.CapUIDPlus) }

// Usable reports whether the connection can still carry a command: it was
// not killed after a failure, and go-imap's reader has not seen it end (the
// server closing it, after a BYE or without one, or a reset). It sends
// nothing, so a connection that went away without a word — a dropped NAT
// mapping, a server host that died — still looks usable; Noop finds that
// out.
func (w *WriteConnection) Usable() bool {
	return w.cn != nil && !w.cn.sock.Broken() && !w.cn.ended()
}

// IdleFor is how long the connection has carried no command.
func (w *WriteConnection) IdleFor() time.Duration { return time.Since(w.lastUsed) }

func (w *WriteConnection) debug(ctx context.Context, msg string, attrs ...slog.Attr) {
	w.log.LogAttrs(ctx, slog.LevelDebug, msg, append([]slog.Attr{slog.String("account", w.ep.AccountID)}, attrs...)...)
}

// run executes one command under a watchdog of the command timeout (see
// runWithin).
func (w *WriteConnection) run(ctx context.Context, name string, f func(c *imapclient.Client) error) error {
	return w.runWithin(ctx, name, w.opts.commandTimeout(), f)
}

// runWithin executes one command under a watchdog of timeout, classified
// as ReadSession.run classifies — the caller's context error, a
// *CommandError or a *TransportError (the connection is then unusable) —
// and, whatever the failure, as an *UnsentError when none of the command's
// bytes was written to the connection. A connection go-imap's reader saw
// end is refused before anything is written, never written into.
//
// The bytes are counted across f, which issues the one command: after
// authentication go-imap writes nothing of its own (its capabilities are
// known, so it sends no CAPABILITY), so bytes written while f ran are the
// command's.
func (w *WriteConnection) runWithin(ctx context.Context, name string, timeout time.Duration, f func(c *imapclient.Client) error) error {
	cn := w.cn
	switch {
	case cn == nil:
		return &UnsentError{Command: name, Err: &TransportError{Op: name, Err: wire.ErrNotConnected}}
	case cn.sock.Broken():
		return &UnsentError{Command: name, Err: &TransportError{Op: name, Err: wire.ErrConnectionUnusable}}
	case cn.ended():
		cn.kill()
		return &UnsentError{Command: name, Err: &TransportError{Op: name, Err: wire.ErrConnectionEnded}}
	}
	if err := ctx.Err(); err != nil {
		return &UnsentError{Command: name, Err: fmt.Errorf("imapx: %s: %w", name, err)}
	}
	start := time.Now()
	before := cn.sock.Written()
	wd := wire.StartWatchdog(ctx, cn.sock, timeout)
	err := f(cn.client)
	reason := wd.Stop()
	written := cn.sock.Written() > before
	w.lastUsed = time.Now()
	w.debug(ctx, "imap write command", slog.String("command", name), slog.Bool("ok", err == nil), slog.Duration("elapsed", time.Since(start)))
	if err == nil {
		return nil
	}
	var own *callerError
	if errors.As(err, &own) {
		return own.err
	}
	var classified error
	switch {
	case reason != nil:
		cn.kill()
		if ctx.Err() != nil {
			classified = fmt.Errorf("imapx: %s: %w", name, ctx.Err())
		} else {
			classified = &TransportError{Op: name, Err: wire.ErrTimedOut}
		}
	default:
		var lost bool
		classified, lost = cn.classify(name, err)
		if lost {
			cn.kill()
		}
	}
	if !written {
		return &UnsentError{Command: name, Err: classified}
	}
	return classified
}

// Close ends the connection with LOGOUT when it is healthy, otherwise by
// closing the socket. Calling it again returns nil.
func (w *WriteConnection) Close() error {
	cn := w.cn
	w.cn = nil
	if cn == nil {
		return nil
	}
	defer cn.shutdown()
	if cn.sock.Broken() || cn.ended() {
		return nil
	}
	wd := wire.StartWatchdog(context.Background(), cn.sock, min(w.opts.commandTimeout(), logoutTimeout))
	err := cn.client.Logout().Wait()
	reason := wd.Stop()
	switch {
	case err == nil, errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, io.EOF):
		return nil
	case reason != nil:
		return &TransportError{Op: "LOGOUT", Err: wire.ErrTimedOut}
	}
	classified, _ := classify("LOGOUT", err)
	return classified
}

// Abandon closes the connection without a word to the server.
func (w *WriteConnection) Abandon() {
	if cn := w.cn; cn != nil {
		w.cn = nil
		cn.shutdown()
	}
}
