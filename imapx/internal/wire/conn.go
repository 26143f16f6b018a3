package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"

	"github.com/emersion/go-imap/v2"
)

// This file is the command side of a Conn: a tagged command writer and the
// loop that reads a command's responses up to its tagged completion
// (RFC 3501 §2.2.1, §2.2.2, §7). The commands themselves live in one file
// each (enable.go, examine.go, fetch.go, search.go, notify.go, logout.go),
// each a method that builds its arguments, runs them through run and reads
// what it needs from the untagged responses; IDLE (idle.go), whose
// completion the client asks for, runs its own exchange.

// commands are the only commands a Conn sends. None of them changes a
// mailbox: ENABLE changes how the server reports, EXAMINE opens a folder
// read-only, UID FETCH asks for FLAGS, UID and MODSEQ only (fetch.go
// refuses any other item), UID SEARCH returns identifiers, NOTIFY and IDLE
// (notify.go, idle.go) ask the server to report changes and carry no
// message data, COMPRESS (compress.go) changes only how the bytes travel. A command outside this list is refused before anything is
// sent.
var commands = map[string]bool{
	"ENABLE":     true,
	"EXAMINE":    true,
	"UID FETCH":  true,
	"UID SEARCH": true,
	"NOTIFY":     true,
	"IDLE":       true,
	"COMPRESS":   true,
	"LOGOUT":     true,
}

// Conn is an authenticated IMAP connection this package drives with its
// own command and response layer, after another client (go-imap, in
// package imapx) has established and authenticated it and let go of the
// stream. It is driven by one goroutine.
//
// Conn does not dial, negotiate TLS or authenticate, and it sends no
// command outside its list (see the methods): nothing that changes a
// mailbox or sets \Seen.
type Conn struct {
	sock *Socket
	rw   net.Conn // the (TLS) stream commands are written to
	dec  *decoder
	caps imap.CapSet // what the server advertised after authentication
	tags int
	// maxUntagged bounds the untagged responses one command may draw.
	maxUntagged int

	// enabled are the extensions the server confirmed with ENABLED.
	enabled map[string]bool
	// folder is the path the last EXAMINE opened, "" when none is open.
	folder string
	bye    bool
	// byeThrottle is what the BYE that ended the conversation said about
	// asking again later (see Throttling).
	byeThrottle Throttle
	// compressed is set once Compress turned compression on; detached
	// once Detach handed the stream to another client.
	compressed, detached bool
}

// New returns a Conn over stream, the (TLS) stream of the authenticated
// connection whose socket is sock; caps are the capabilities the server
// advertised after authentication. The first response may be preceded by
// a bare line ending: the end of the last response the previous client
// read, which its reader may have left unread.
//
// maxUntagged bounds the untagged responses one command may draw: the
// caller knows the largest set a command names and adds room for
// unsolicited updates. A server that keeps sending past it is cut off with
// ErrMalformedResponse.
func New(sock *Socket, stream net.Conn, caps imap.CapSet, maxUntagged int) *Conn {
	dec := newDecoder(stream)
	dec.skipBlank = true
	return &Conn{sock: sock, rw: stream, dec: dec, caps: caps, maxUntagged: maxUntagged, enabled: map[string]bool{}}
}

// Caps returns the capabilities the server advertised after
// authentication, as New was given them.
func (c *Conn) Caps() imap.CapSet { return c.caps }

// Handler gets every untagged response of a command. It must not keep
// the response's slices beyond the call unless it owns them (they are not
// reused, so keeping them is allowed).
type Handler func(*Response)

// run sends one command and reads its responses until the tagged one. A NO
// or BAD is a *CommandError and leaves the connection usable; anything that
// ends the conversation (a write or read failure, a malformed response, a
// BYE, the watchdog) kills the connection and is a *TransportError, or the
// caller's context error.
func (c *Conn) run(ctx context.Context, timeout time.Duration, name, args string, handle Handler) error {
	if !commands[name] {
		// A programming error, refused before anything is sent.
		return fmt.Errorf("imapx: %s is not a command this connection sends", name)
	}
	if c.sock.Broken() || c.detached {
		return &TransportError{Op: name, Err: ErrConnectionUnusable}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("imapx: %s: %w", name, err)
	}
	c.tags++
	tag := "R" + strconv.Itoa(c.tags)
	line := make([]byte, 0, len(tag)+len(name)+len(args)+4)
	line = append(line, tag...)
	line = append(line, ' ')
	line = append(line, name...)
	if args != "" {
		line = append(line, ' ')
		line = append(line, args...)
	}
	line = append(line, '\r', '\n')

	wd := StartWatchdog(ctx, c.sock, timeout)
	done, err := c.exchange(tag, line, handle)
	reason := wd.Stop()
	if err == nil {
		if done.Status != "OK" {
			return &CommandError{Command: name, Status: done.Status, Code: done.Code, Throttle: c.throttleOf(done)}
		}
		return nil
	}
	c.sock.Kill()
	switch {
	case ctx.Err() != nil && reason != nil:
		return fmt.Errorf("imapx: %s: %w", name, ctx.Err())
	case reason != nil:
		return &TransportError{Op: name, Err: ErrTimedOut}
	case c.bye && !errors.Is(err, ErrMalformedResponse):
		return &TransportError{Op: name, Err: ErrServerBye, Throttle: c.byeThrottle}
	}
	return &TransportError{Op: name, Err: err}
}

// throttleOf is what a command's tagged completion done says about asking
// again later, or, when it says nothing, what a BYE before it said.
func (c *Conn) throttleOf(done *Response) Throttle {
	if done.Throttle.Throttles() {
		return done.Throttle
	}
	return c.byeThrottle
}

// noteBye records a BYE response r: the conversation is ending, and what
// it says about asking again later is what the command it ends reports.
func (c *Conn) noteBye(r *Response) {
	c.bye = true
	if r.Throttle.Throttles() {
		c.byeThrottle = r.Throttle
	}
}

// exchange writes line and reads up to the tagged response for tag.
func (c *Conn) exchange(tag string, line []byte, handle Handler) (*Response, error) {
	if _, err := c.rw.Write(line); err != nil {
		return nil, err
	}
	for n := 0; ; n++ {
		r, err := c.dec.readResponse()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, err
		}
		if r.Kind != RespTagged && n >= c.maxUntagged {
			return nil, malformed("too many responses to one command")
		}
		switch r.Kind {
		case RespTagged:
			if r.Tag != tag {
				return nil, malformed("completion of a command that was not sent")
			}
			return r, nil
		case RespContinue:
			// Nothing this connection sends has a literal or a SASL
			// exchange to continue.
			return nil, malformed("unexpected continuation request")
		case RespStatus:
			if r.Status == "BYE" {
				c.noteBye(r)
			}
		case RespESearch:
			if r.HasCorrelator && r.Correlator != tag {
				continue // another command's answer
			}
		}
		if handle != nil {
			handle(r)
		}
	}
}

// Usable reports whether the connection can take another command: no
// failure has killed it.
func (c *Conn) Usable() bool { return !c.sock.Broken() && !c.detached }

// Shutdown closes the connection without a word to the server.
func (c *Conn) Shutdown() { c.sock.Kill() }

// Close ends the connection with LOGOUT, bounded by timeout, when it is
// usable, and closes the socket either way. It reports only LOGOUT's
// failure.
func (c *Conn) Close(timeout time.Duration) error {
	defer c.Shutdown()
	if !c.Usable() {
		return nil
	}
	return c.Logout(timeout)
}
