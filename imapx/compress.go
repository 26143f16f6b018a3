package imapx

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// A read session's main connection carries the message content of the
// forward pass, which is what compression is for: on a slow link, mail
// text deflates to a fraction of its size. go-imap has no COMPRESS, so the
// connection is compressed in between: go-imap dials and authenticates it
// as it does every connection (dial.go, auth.go), handoff takes the stream
// away from it, the adapter's own command layer (package wire) negotiates
// COMPRESS=DEFLATE (RFC 4978), and a new go-imap client is attached to the
// inflated stream, behind a greeting made up here that says what the
// server already said: the connection is authenticated (PREAUTH), with
// the capabilities the server advertised after authentication (RFC 4978
// does not change them). From then on go-imap reads and writes plain IMAP
// and never sees a compressed byte; every command, its timeout, the
// BODY.PEEK-only fetches and the failure classification are the same as
// on an uncompressed connection.

// dialRead opens a read session's main connection: as dial does, and then,
// when ep.Compression asks for it on the address the connection reached
// (wantsCompression) and the server advertises COMPRESS=DEFLATE, with
// compression on. A server that does not advertise it is not asked. A
// server that refuses it (NO or BAD) leaves the connection uncompressed and
// usable; any other failure is the connection's, as dial's are. What was
// decided, and why, is kept on the connection (ReadSession.Compression).
func dialRead(ctx context.Context, ep Endpoint, opts SessionOptions) (*conn, imap.CapSet, error) {
	if ep.Compression != CompressionOn && ep.Compression != CompressionAuto {
		cn, caps, err := dial(ctx, ep, opts)
		if cn != nil {
			cn.compression = Compression{Reason: CompressionReasonConfiguredOff}
		}
		return cn, caps, err
	}
	h := &handoff{}
	cn, caps, err := dialVia(ctx, ep, opts, h)
	if err != nil {
		return nil, nil, err
	}
	ask, reason := wantsCompression(ep.Compression, cn.sock.RemoteAddr())
	switch {
	case !ask:
		cn.compression = Compression{Reason: reason}
		return cn, caps, nil
	case !caps.Has(wire.CapCompressDeflate):
		cn.compression = Compression{Reason: CompressionReasonNotOffered}
		return cn, caps, nil
	}
	if err := h.takeOver(cn); err != nil {
		cn.shutdown()
		return nil, nil, &TransportError{Op: "connect", Err: err}
	}
	wc := wire.New(cn.sock, h.Conn, caps, maxUntaggedBeforeSelect)
	err = wc.Compress(ctx, opts.commandTimeout())
	var refused *wire.CommandError
	if err != nil && !errors.As(err, &refused) {
		wc.Shutdown()
		return nil, nil, fromWire(err)
	}
	stream := wc.Detach()
	greeting := strings.NewReader(preauthGreeting(caps))
	cn.attach(&prefixConn{Conn: stream, r: io.MultiReader(greeting, stream)})
	if err := cn.client.WaitGreeting(); err != nil {
		// The greeting is this package's own; only a connection that
		// failed meanwhile gets here.
		cn.shutdown()
		return nil, nil, &TransportError{Op: "connect", Err: err}
	}
	cn.compression = Compression{InUse: wc.Compressed(), Reason: reason}
	if refused != nil {
		cn.compression.Reason = CompressionReasonRefused
	}
	return cn, caps, nil
}

// maxUntaggedBeforeSelect bounds the untagged responses COMPRESS may draw:
// with no folder open, a server has little to say unsolicited.
const maxUntaggedBeforeSelect = 1_000

// preauthGreeting is the greeting the go-imap client attached after
// COMPRESS reads first: authenticated, with caps.
func preauthGreeting(caps imap.CapSet) string {
	names := make([]string, 0, len(caps))
	for c := range caps {
		names = append(names, string(c))
	}
	sort.Strings(names)
	return "* PREAUTH [CAPABILITY " + strings.Join(names, " ") + "] connection taken over\r\n"
}

// Compression reports whether the session's main connection runs with
// COMPRESS=DEFLATE, and why (Endpoint.Compression, the address it reached
// and what the server offered). A session with no main connection — one
// of OpenReconcileSession, or one whose connection is being replaced —
// reports the zero Compression.
func (s *ReadSession) Compression() Compression {
	if s.cn == nil {
		return Compression{}
	}
	return s.cn.compression
}
