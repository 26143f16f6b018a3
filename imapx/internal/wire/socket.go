package wire

import (
	"context"
	"fmt"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Socket is the dialed network connection under one IMAP connection, and
// the flag that says it is no longer usable. Every layer that talks over it
// (go-imap while it is in charge, Conn afterwards) ends a failed or
// timed-out conversation the same way: Kill closes the socket itself,
// underneath any TLS, which unblocks every reader and writer at once.
//
// Socket does not read or write itself; it ends the connection, and it
// counts what is written through the stream Counted returns, which is how
// the owner tells a command that failed before any of its bytes left from
// one the server may have received. It does not send LOGOUT or wait for
// anyone's reader: that is the owner's business.
type Socket struct {
	raw     net.Conn
	broken  atomic.Bool
	written atomic.Int64
}

// NewSocket wraps the dialed connection raw.
func NewSocket(raw net.Conn) *Socket { return &Socket{raw: raw} }

// Kill marks the connection unusable and closes the socket without a word
// to the server. Safe to call more than once and from any goroutine.
func (s *Socket) Kill() {
	s.broken.Store(true)
	_ = s.raw.Close()
}

// Broken reports whether Kill was called: the connection can take no
// further command.
func (s *Socket) Broken() bool { return s.broken.Load() }

// RemoteAddr is the address the connection reached.
func (s *Socket) RemoteAddr() net.Addr { return s.raw.RemoteAddr() }

// Counted returns stream — the protocol stream over this socket: the socket
// itself, or TLS over it — with every byte its Write accepts added to
// Written. Only what the stream's user writes is counted, never what a TLS
// layer writes on its own (a close_notify as go-imap closes the stream, a
// key update), so a count that did not grow over a command means none of
// that command's bytes was written to the connection, and the server
// cannot have received it. A count that grew says only that some bytes
// left; whether the server read them is unknown.
func (s *Socket) Counted(stream net.Conn) net.Conn { return &countedConn{Conn: stream, s: s} }

// Written is how many bytes were written through the stream Counted
// returned.
func (s *Socket) Written() int64 { return s.written.Load() }

// countedConn is a stream whose written bytes its Socket counts.
type countedConn struct {
	net.Conn
	s *Socket
}

func (c *countedConn) Write(p []byte) (int, error) {
	n, err := c.Conn.Write(p)
	c.s.written.Add(int64(n))
	return n, err
}

// ErrTimedOut is the cause of a *TransportError for a command that ran
// longer than its timeout. It wraps os.ErrDeadlineExceeded, which a
// caller's context deadline (context.DeadlineExceeded) does not.
var ErrTimedOut = fmt.Errorf("command timed out: %w", os.ErrDeadlineExceeded)

// Watchdog kills a Socket when a command runs longer than its timeout or
// when the caller's context ends. Pause and Resume exclude stretches of
// time that are not the server's (a caller's callback); Resume also
// restarts the timeout, which is how a streaming command counts progress.
//
// A Watchdog does not report anything by itself: the command it guards
// fails on the closed socket, and Stop then says why the socket was closed.
type Watchdog struct {
	sock    *Socket
	timeout time.Duration
	timer   *time.Timer
	stopCtx func() bool

	mu     sync.Mutex
	reason error // ErrTimedOut or the context's error, once fired
	done   bool
}

// StartWatchdog arms a watchdog over sock for one command. Every
// StartWatchdog must be followed by Stop.
func StartWatchdog(ctx context.Context, sock *Socket, timeout time.Duration) *Watchdog {
	w := &Watchdog{sock: sock, timeout: timeout}
	w.timer = time.AfterFunc(timeout, func() { w.fire(ErrTimedOut) })
	w.stopCtx = context.AfterFunc(ctx, func() { w.fire(ctx.Err()) })
	return w
}

func (w *Watchdog) fire(reason error) {
	w.mu.Lock()
	if w.done || w.reason != nil {
		w.mu.Unlock()
		return
	}
	w.reason = reason
	w.mu.Unlock()
	w.sock.Kill()
}

// Pause stops the timeout; the caller's context still applies.
func (w *Watchdog) Pause() { w.timer.Stop() }

// Resume restarts the timeout from now.
func (w *Watchdog) Resume() { w.timer.Reset(w.timeout) }

// Kill kills the guarded socket now, for a command its caller abandons
// (Socket.Kill). It is not a firing: Stop still reports why the watchdog
// fired, or nil.
func (w *Watchdog) Kill() { w.sock.Kill() }

// Stop disarms the watchdog and returns why it fired: ErrTimedOut, the
// context's error, or nil when it did not.
func (w *Watchdog) Stop() error {
	w.timer.Stop()
	w.stopCtx()
	w.mu.Lock()
	defer w.mu.Unlock()
	w.done = true
	return w.reason
}
