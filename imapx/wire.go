package imapx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// This file is the command side of the reconciliation connection: a tagged
// command writer and the loop that reads a command's responses up to its
// tagged completion (RFC 3501 §2.2.1, §2.2.2, §7). It exists because
// go-imap's client can neither enable QRESYNC nor survive the VANISHED
// response that follows, and offers no way to send a command it does not
// know (see doc.go). The commands themselves live in one file each
// (wire_enable.go, wire_examine.go, wire_fetch.go, wire_search.go,
// wire_logout.go).

// wireCommands are the only commands the reconciliation connection sends
// after authentication. None of them changes a mailbox: ENABLE changes how
// the server reports, EXAMINE opens a folder read-only, UID FETCH asks for
// FLAGS, UID and MODSEQ only (wire_fetch.go refuses any other item), UID
// SEARCH returns identifiers.
var wireCommands = map[string]bool{
	"ENABLE":     true,
	"EXAMINE":    true,
	"UID FETCH":  true,
	"UID SEARCH": true,
	"LOGOUT":     true,
}

// maxUntaggedPerCommand bounds the untagged responses one command may
// draw: the largest window has one FETCH per UID, and the rest is room for
// unsolicited updates. A server that keeps sending past it is cut off.
const maxUntaggedPerCommand = 2*MaxReconcileWindow + 10_000

// wireConn is a connection this package drives with its own command and
// response layer, after go-imap has established and authenticated it (see
// handoff in wire_dial.go).
type wireConn struct {
	cn   *conn    // the socket, its broken flag and the watchdog's kill
	rw   net.Conn // the (TLS) stream commands are written to
	dec  *decoder
	caps imap.CapSet // what the server advertised after authentication
	tags int

	// qresync is set once the server answered ENABLE QRESYNC with ENABLED
	// QRESYNC; from then on it reports removals as VANISHED.
	qresync bool
	// folder is the path the last EXAMINE opened, "" when none is open.
	folder string
	bye    bool
}

// wireHandler gets every untagged response of a command. It must not keep
// the response's slices beyond the call unless it owns them (they are not
// reused, so keeping them is allowed).
type wireHandler func(*response)

// run sends one command and reads its responses until the tagged one. A NO
// or BAD is a *CommandError and leaves the connection usable; anything that
// ends the conversation (a write or read failure, a malformed response, a
// BYE, the watchdog) kills the connection and is a *TransportError, or the
// caller's context error.
func (w *wireConn) run(ctx context.Context, timeout time.Duration, name, args string, handle wireHandler) error {
	if !wireCommands[name] {
		// A programming error, refused before anything is sent.
		return fmt.Errorf("imapx: %s is not a command the reconciliation connection sends", name)
	}
	if w.cn.sock.Broken() {
		return &TransportError{Op: name, Err: wire.ErrConnectionUnusable}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("imapx: %s: %w", name, err)
	}
	w.tags++
	tag := "R" + strconv.Itoa(w.tags)
	line := make([]byte, 0, len(tag)+len(name)+len(args)+4)
	line = append(line, tag...)
	line = append(line, ' ')
	line = append(line, name...)
	if args != "" {
		line = append(line, ' ')
		line = append(line, args...)
	}
	line = append(line, '\r', '\n')

	wd := wire.StartWatchdog(ctx, w.cn.sock, timeout)
	done, err := w.exchange(tag, line, handle)
	reason := wd.Stop()
	if err == nil {
		if done.status != "OK" {
			return &CommandError{Command: name, Status: done.status, Code: done.code}
		}
		return nil
	}
	w.cn.kill()
	switch {
	case ctx.Err() != nil && reason != nil:
		return fmt.Errorf("imapx: %s: %w", name, ctx.Err())
	case reason != nil:
		return &TransportError{Op: name, Err: wire.ErrTimedOut}
	case w.bye && !errors.Is(err, ErrMalformedResponse):
		return &TransportError{Op: name, Err: wire.ErrServerBye}
	}
	return &TransportError{Op: name, Err: err}
}

// exchange writes line and reads up to the tagged response for tag.
func (w *wireConn) exchange(tag string, line []byte, handle wireHandler) (*response, error) {
	if _, err := w.rw.Write(line); err != nil {
		return nil, err
	}
	for n := 0; ; n++ {
		r, err := w.dec.readResponse()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if r.kind != respTagged && n >= maxUntaggedPerCommand {
			return nil, malformed("too many responses to one command")
		}
		switch r.kind {
		case respTagged:
			if r.tag != tag {
				return nil, malformed("completion of a command that was not sent")
			}
			return r, nil
		case respContinue:
			// Nothing this connection sends has a literal or a SASL
			// exchange to continue.
			return nil, malformed("unexpected continuation request")
		case respStatus:
			if r.status == "BYE" {
				w.bye = true
			}
		case respESearch:
			if r.hasCorrelator && r.correlator != tag {
				continue // another command's answer
			}
		}
		if handle != nil {
			handle(r)
		}
	}
}

// usable reports whether the connection can take another command.
func (w *wireConn) usable() bool { return !w.cn.sock.Broken() }

// shutdown closes the connection without a word to the server.
func (w *wireConn) shutdown() { w.cn.shutdown() }

// close ends the connection with LOGOUT when it is healthy, bounded like
// ReadSession.Close, and closes the socket either way.
func (w *wireConn) close(opts SessionOptions) error {
	defer w.cn.shutdown()
	if !w.usable() {
		return nil
	}
	return w.logout(min(opts.commandTimeout(), logoutTimeout))
}
