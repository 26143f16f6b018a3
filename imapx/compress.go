package imapx

import (
	"context"
	"errors"
	"io"
	"sort"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

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
// when ep.Compression asks for it and the server advertises
// COMPRESS=DEFLATE, with compression on. A server that does not advertise
// it is not asked. A server that refuses it (NO or BAD) leaves the
// connection uncompressed and usable; any other failure is the
// connection's, as dial's are.
func dialRead(ctx context.Context, ep Endpoint, opts SessionOptions) (*conn, imap.CapSet, error) {
	if !ep.Compression {
		return dial(ctx, ep, opts)
	}
	h := &handoff{}
	cn, caps, err := dialVia(ctx, ep, opts, h)
	if err != nil {
		return nil, nil, err
	}
	if !caps.Has(wire.CapCompressDeflate) {
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
	cn.client = imapclient.New(&prefixConn{Conn: stream, r: io.MultiReader(greeting, stream)}, cn.clientOptions())
	if err := cn.client.WaitGreeting(); err != nil {
		// The greeting is this package's own; only a connection that
		// failed meanwhile gets here.
		cn.shutdown()
		return nil, nil, &TransportError{Op: "connect", Err: err}
	}
	cn.compressed = wc.Compressed()
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

// Compressed reports whether the session's main connection runs with
// COMPRESS=DEFLATE (Endpoint.Compression, and a server that offers it).
func (s *ReadSession) Compressed() bool {
	return s.cn != nil && s.cn.compressed
}
