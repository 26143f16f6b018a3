package imapx

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// The reconciliation connection is established exactly like a read
// session's: dialVia runs the same dial, TLS or STARTTLS negotiation,
// greeting and authentication (dial.go, auth.go) with go-imap. Once
// go-imap has authenticated it and read the capabilities, handoff takes the
// stream away from go-imap's reader, and the adapter's own command and
// response layer (package wire) drives it from then on. So the credential
// handling, the allow-list and the TLS policy are the ones every other
// connection uses, and go-imap never sees a response it cannot parse.

// errTakeover is the cause of a *TransportError when go-imap's reader did
// not let go of the stream in time.
var errTakeover = errors.New("go-imap's reader did not stop")

// handoff stands between the protected stream and go-imap. Until takeOver
// it passes everything through; afterwards go-imap reads end of file, and
// its writes, deadlines and Close no longer reach the stream.
type handoff struct {
	net.Conn // the protected stream

	mu       sync.Mutex // orders takeOver against go-imap's deadline calls
	detached atomic.Bool
}

func (h *handoff) Read(p []byte) (int, error) {
	if h.detached.Load() {
		return 0, io.EOF
	}
	n, err := h.Conn.Read(p)
	if err != nil && h.detached.Load() {
		// The read takeOver interrupted.
		return n, io.EOF
	}
	return n, err
}

func (h *handoff) Write(p []byte) (int, error) {
	if h.detached.Load() {
		return 0, net.ErrClosed
	}
	return h.Conn.Write(p)
}

func (h *handoff) Close() error {
	if h.detached.Load() {
		return nil
	}
	return h.Conn.Close()
}

func (h *handoff) SetDeadline(t time.Time) error {
	return h.deadline(func() error { return h.Conn.SetDeadline(t) })
}

func (h *handoff) SetReadDeadline(t time.Time) error {
	return h.deadline(func() error { return h.Conn.SetReadDeadline(t) })
}

func (h *handoff) SetWriteDeadline(t time.Time) error {
	return h.deadline(func() error { return h.Conn.SetWriteDeadline(t) })
}

func (h *handoff) deadline(set func() error) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.detached.Load() {
		return nil
	}
	return set()
}

// takeOver detaches go-imap from the stream of cn, whose commands have all
// completed: a read deadline in the past interrupts go-imap's pending read,
// which then sees end of file and ends its reader. Nothing has been sent
// that a response could still be owed for, so no byte of a later command's
// answer can have gone to go-imap. (The line ending of go-imap's last
// response may still be unread; wire.New accepts it.)
func (h *handoff) takeOver(cn *conn) error {
	h.mu.Lock()
	h.detached.Store(true)
	err := h.Conn.SetReadDeadline(time.Unix(1, 0))
	h.mu.Unlock()
	if err != nil {
		return err
	}
	t := time.NewTimer(closeWait)
	defer t.Stop()
	select {
	case <-cn.client.Closed():
	case <-t.C:
		return errTakeover
	}
	cn.client = nil
	return h.Conn.SetDeadline(time.Time{})
}

// maxUntaggedPerCommand bounds the untagged responses one command of the
// reconciliation connection may draw: the largest window has one FETCH per
// UID, and the rest is room for unsolicited updates. A server that keeps
// sending past it is cut off.
const maxUntaggedPerCommand = 2*MaxReconcileWindow + 10_000

// dialWire opens a connection like OpenReadSession does and takes it over
// from go-imap. No folder is open on it. tls reports whether it is
// encrypted.
func dialWire(ctx context.Context, ep Endpoint, opts SessionOptions) (_ *wire.Conn, tls bool, _ error) {
	h := &handoff{}
	cn, caps, err := dialVia(ctx, ep, opts, h)
	if err != nil {
		return nil, false, err
	}
	if err := h.takeOver(cn); err != nil {
		cn.shutdown()
		return nil, false, &TransportError{Op: "connect", Err: err}
	}
	return wire.New(cn.sock, h.Conn, caps, maxUntaggedPerCommand), cn.tls, nil
}
