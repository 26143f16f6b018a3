package imapx

import (
	"context"
	"errors"
	"net"
	"sync"
	"time"
)

// A read session fetches content with go-imap, which cannot parse the
// FETCH items that name a message across folders (X-GM-MSGID,
// X-GM-THRID, X-GM-LABELS; EMAILID, THREADID). Rather than open a second
// connection for them — a second login to the server — the session lends
// its own connection to the wire layer between two of go-imap's commands:
// the gate stands between the stream and go-imap, and while the
// connection is lent go-imap's reader waits and every byte read goes to
// the wire layer. Handing back gives go-imap whatever the wire layer read
// past its last response, then the stream again.
//
// The gate lends only while go-imap's reader is waiting for the first
// byte of a new response: it has ended the last one (go-imap clears its
// read deadline at the end of each response) and been handed nothing
// since. A command's tagged completion reaches its caller before go-imap
// has read that response's line ending, so lending at once could hand the
// line ending, and go-imap's place in the stream, to the wire layer.
// (What the gate cannot see is go-imap's own buffer: a response the server
// sent unasked right behind a command's completion, and that go-imap had
// read only in part, would be cut. Servers send such updates while a
// command runs, and a read session lends only between its commands.)
//
// It does not interrupt go-imap's pending read (a deadline would break a
// compressed stream's inflater): that read goes on, and whatever it
// brings is the borrower's while the connection is lent.

// errLendTimeout is the cause of a *TransportError when go-imap's reader
// did not come to rest between responses in time.
var errLendTimeout = errors.New("go-imap's reader did not come to rest")

// gate is the stream go-imap reads (behind its ByeWatch).
type gate struct {
	net.Conn // the stream; writes, Close and write deadlines go straight to it

	mu   sync.Mutex
	cond *sync.Cond
	// lent: the wire layer owns what is read.
	lent bool
	// reading: a goroutine is in Conn.Read.
	reading bool
	// imapWaiting: go-imap's reader is in Read. imapIdle: go-imap ended a
	// response and was handed nothing since.
	imapWaiting, imapIdle bool
	// toImap and toWire are bytes read for each side and not yet taken.
	toImap, toWire []byte
	// err is the stream's failure, which ends both sides.
	err error
	// deadline is go-imap's read deadline, set on the stream again when
	// the connection is handed back.
	deadline time.Time
}

func newGate(stream net.Conn) *gate {
	g := &gate{Conn: stream}
	g.cond = sync.NewCond(&g.mu)
	return g
}

// Read is go-imap's read.
func (g *gate) Read(p []byte) (int, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.imapWaiting = true
	g.cond.Broadcast()
	defer func() { g.imapWaiting = false }()
	for {
		switch {
		case len(g.toImap) > 0:
			n := copy(p, g.toImap)
			g.toImap = g.toImap[n:]
			g.imapIdle = false
			return n, nil
		case g.lent || g.reading:
			g.cond.Wait()
		case g.err != nil:
			return 0, g.err
		default:
			n := g.readLocked(p)
			if g.lent {
				// Lent while this read was under way: what it brought is
				// the borrower's.
				g.toWire = append(g.toWire, p[:n]...)
				continue
			}
			if n > 0 {
				g.imapIdle = false
				return n, nil
			}
		}
	}
}

// readLocked reads from the stream with g.mu released, records a failure
// and wakes every waiting side.
func (g *gate) readLocked(p []byte) int {
	g.reading = true
	g.mu.Unlock()
	n, err := g.Conn.Read(p)
	g.mu.Lock()
	g.reading = false
	if err != nil && g.err == nil {
		g.err = err
	}
	g.cond.Broadcast()
	return n
}

// SetReadDeadline is go-imap's: it clears its deadline at the end of every
// response, which is how the gate knows it is between responses. While
// the connection is lent the deadline waits for the hand-back.
func (g *gate) SetReadDeadline(t time.Time) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.deadline = t
	if t.IsZero() {
		g.imapIdle = true
		g.cond.Broadcast()
	}
	if g.lent {
		return nil
	}
	return g.Conn.SetReadDeadline(t)
}

// SetDeadline keeps the read deadline go-imap set for the hand-back, like
// SetReadDeadline.
func (g *gate) SetDeadline(t time.Time) error {
	if err := g.SetReadDeadline(t); err != nil {
		return err
	}
	return g.Conn.SetWriteDeadline(t)
}

// lend waits, at most timeout, for go-imap's reader to rest between
// responses, and returns the stream for the wire layer. The caller must
// hand it back with giveBack.
func (g *gate) lend(ctx context.Context, timeout time.Duration) (net.Conn, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	expired := false
	stop := context.AfterFunc(ctx, func() { g.wake(&expired) })
	defer stop()
	t := time.AfterFunc(timeout, func() { g.wake(&expired) })
	defer t.Stop()
	for !(g.imapWaiting && g.imapIdle) && g.err == nil && !expired {
		g.cond.Wait()
	}
	switch {
	case g.err != nil:
		return nil, g.err
	case ctx.Err() != nil:
		return nil, ctx.Err()
	case expired:
		return nil, errLendTimeout
	}
	g.lent = true
	// The wire layer keeps time with its own watchdog; go-imap's deadline
	// is set again on hand-back.
	if err := g.Conn.SetReadDeadline(time.Time{}); err != nil {
		g.lent = false
		return nil, err
	}
	return lentConn{g}, nil
}

func (g *gate) wake(expired *bool) {
	g.mu.Lock()
	*expired = true
	g.cond.Broadcast()
	g.mu.Unlock()
}

// giveBack ends a lend: go-imap reads rest — what the wire layer read and
// did not use — and whatever was read for the wire layer after it, then
// the stream.
func (g *gate) giveBack(rest []byte) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.toImap = append(append(g.toImap, rest...), g.toWire...)
	g.toWire = nil
	g.lent = false
	if err := g.Conn.SetReadDeadline(g.deadline); err != nil && g.err == nil {
		g.err = err
	}
	g.cond.Broadcast()
}

// lentConn is the stream as the wire layer reads it while it is lent.
type lentConn struct{ g *gate }

func (l lentConn) Read(p []byte) (int, error) {
	g := l.g
	g.mu.Lock()
	defer g.mu.Unlock()
	for {
		switch {
		case len(g.toWire) > 0:
			n := copy(p, g.toWire)
			g.toWire = g.toWire[n:]
			return n, nil
		case g.err != nil:
			return 0, g.err
		case g.reading:
			g.cond.Wait()
		default:
			if n := g.readLocked(p); n > 0 {
				return n, nil
			}
		}
	}
}

func (l lentConn) Write(p []byte) (int, error)        { return l.g.Conn.Write(p) }
func (l lentConn) Close() error                       { return l.g.Conn.Close() }
func (l lentConn) LocalAddr() net.Addr                { return l.g.Conn.LocalAddr() }
func (l lentConn) RemoteAddr() net.Addr               { return l.g.Conn.RemoteAddr() }
func (l lentConn) SetDeadline(t time.Time) error      { return l.g.Conn.SetDeadline(t) }
func (l lentConn) SetReadDeadline(t time.Time) error  { return l.g.Conn.SetReadDeadline(t) }
func (l lentConn) SetWriteDeadline(t time.Time) error { return l.g.Conn.SetWriteDeadline(t) }
