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
// flag with .SILENT, UID EXPUNGE (RFC 4315 §2.1) and LOGOUT, each for one
// UID. It never sends a plain EXPUNGE, which would also remove messages the
// mailbox owner flagged \Deleted in their own client, and never uses
// go-imap's Move, whose fallback for a server without MOVE is COPY, STORE
// and a plain EXPUNGE: a relocation without MOVE is composed by the caller
// from Copy, StoreFlags and ExpungeUID, so each step can be recorded before
// the next is issued.
//
// A WriteConnection is not safe for concurrent use, and holds at most one
// folder selected, read-write. It does not reconnect: after a
// *TransportError it is unusable, and the caller opens another.
type WriteConnection struct {
	ep   Endpoint
	opts SessionOptions
	log  *slog.Logger

	cn   *conn
	caps imap.CapSet

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
// connection failed after the command may have reached the server. Whether
// it ran is unknown, so it must never be issued again — by the caller, a
// retry policy or anything else — and IsTransient is false for it.
type PlacementUnknownError struct {
	Command string // "UID MOVE" or "UID COPY"
	cause   error
}

func (e *PlacementUnknownError) Error() string {
	return "imapx: " + e.Command + " was sent and its answer never read: " + wire.TransportKind(e.cause)
}

// Identity implements failure.Named.
func (e *PlacementUnknownError) Identity() string { return "MailboxChangeOutcomeUnknown" }

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
	w.cn, w.caps = cn, caps
	w.debug(ctx, "imap write connection opened")
	return w, nil
}

// CanMove reports whether the server advertises MOVE (RFC 6851) or
// IMAP4rev2.
func (w *WriteConnection) CanMove() bool { return w.caps.Has(imap.CapMove) }

// CanExpungeUID reports whether the server advertises UIDPLUS (RFC 4315)
// or IMAP4rev2, without which no expunge is safe.
func (w *WriteConnection) CanExpungeUID() bool { return w.caps.Has(imap.CapUIDPlus) }

// Usable reports whether the connection can still carry a command.
func (w *WriteConnection) Usable() bool { return w.cn != nil && !w.cn.sock.Broken() }

func (w *WriteConnection) debug(ctx context.Context, msg string, attrs ...slog.Attr) {
	w.log.LogAttrs(ctx, slog.LevelDebug, msg, append([]slog.Attr{slog.String("account", w.ep.AccountID)}, attrs...)...)
}

// run executes one command under a watchdog, classified as ReadSession.run
// classifies: the caller's context error, a *CommandError or a
// *TransportError (the connection is then unusable).
func (w *WriteConnection) run(ctx context.Context, name string, f func(c *imapclient.Client) error) error {
	cn := w.cn
	if cn == nil {
		return &TransportError{Op: name, Err: wire.ErrNotConnected}
	}
	if cn.sock.Broken() {
		return &TransportError{Op: name, Err: wire.ErrConnectionUnusable}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("imapx: %s: %w", name, err)
	}
	start := time.Now()
	wd := wire.StartWatchdog(ctx, cn.sock, w.opts.commandTimeout())
	err := f(cn.client)
	reason := wd.Stop()
	w.debug(ctx, "imap write command", slog.String("command", name), slog.Bool("ok", err == nil), slog.Duration("elapsed", time.Since(start)))
	if err == nil {
		return nil
	}
	var own *callerError
	if errors.As(err, &own) {
		return own.err
	}
	if reason != nil {
		cn.kill()
		if ctx.Err() != nil {
			return fmt.Errorf("imapx: %s: %w", name, ctx.Err())
		}
		return &TransportError{Op: name, Err: wire.ErrTimedOut}
	}
	classified, lost := classify(name, err)
	if lost {
		cn.kill()
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
	if cn.sock.Broken() {
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
