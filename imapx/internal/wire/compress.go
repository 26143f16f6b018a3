package wire

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/klauspost/compress/flate"
)

// CapCompressDeflate is the capability of a server that accepts COMPRESS
// DEFLATE (RFC 4978 §3).
const CapCompressDeflate imap.Cap = "COMPRESS=DEFLATE"

// ErrCompressionUnavailable is returned by Compress, before anything is
// sent, when the server did not advertise COMPRESS=DEFLATE.
var ErrCompressionUnavailable = errors.New("imapx: the server does not offer COMPRESS=DEFLATE")

// Compress turns on DEFLATE compression of both directions of the
// connection (RFC 4978): it sends COMPRESS DEFLATE and, once the server
// has answered OK, everything written is deflated and everything read is
// inflated, starting with the first byte after the OK's line ending
// (RFC 4978 §3). It runs in the authenticated state, before any folder is
// opened, as RFC 4978 §4 recommends.
//
// Each command is written as one deflate block ended by a sync flush
// (Z_SYNC_FLUSH, RFC 4978 §4), so the server can act on it at once; the
// server does the same after each response, which the inflater reads a
// block at a time without waiting for more.
//
// A server that did not advertise COMPRESS=DEFLATE is not asked:
// ErrCompressionUnavailable. A NO or BAD (for example [COMPRESSIONACTIVE])
// is a *CommandError and leaves the connection usable, uncompressed.
//
// Compress does not compress at a chosen level for speed or ratio beyond
// what flate.BestSpeed gives: the client sends only short commands.
func (c *Conn) Compress(ctx context.Context, timeout time.Duration) error {
	if !c.caps.Has(CapCompressDeflate) {
		return ErrCompressionUnavailable
	}
	if c.compressed {
		return &CommandError{Command: "COMPRESS", Status: "NO", Code: "COMPRESSIONACTIVE"}
	}
	if err := c.run(ctx, timeout, "COMPRESS", "DEFLATE", nil); err != nil {
		return err
	}
	// The old decoder's buffer may already hold compressed bytes the
	// server sent after its OK: the inflater reads through it.
	dc, err := newDeflateConn(c.rw, c.dec.r)
	if err != nil {
		c.sock.Kill()
		return &TransportError{Op: "COMPRESS", Err: err}
	}
	c.rw, c.compressed = dc, true
	c.dec = newDecoder(dc)
	return nil
}

// Compressed reports whether Compress turned compression on.
func (c *Conn) Compressed() bool { return c.compressed }

// Detach hands the connection's stream to another client and leaves the
// Conn without one: reads give the server's bytes after the last response
// this Conn read (inflated when Compress turned compression on, including
// whatever it had buffered), writes go to the server (deflated likewise).
// Deadlines and Close reach the (TLS) stream underneath. The Conn takes no
// further command; Shutdown still kills the socket.
//
// Precondition: no command is running. Detach does not send anything.
func (c *Conn) Detach() net.Conn {
	stream := c.rw
	rest := c.Handback()
	return &prefixedConn{Conn: stream, r: io.MultiReader(bytes.NewReader(rest), stream)}
}

// Handback ends the Conn's use of its stream, as Detach does, and returns
// the bytes it read past its last response, which are the next client's.
//
// Precondition: no command is running. Handback does not send anything.
func (c *Conn) Handback() []byte {
	buffered, _ := c.dec.r.Peek(c.dec.r.Buffered())
	c.detached = true
	return append([]byte(nil), buffered...)
}

// deflateConn is a stream with RFC 4978 compression: writes are deflated
// and sync-flushed one call at a time, reads are inflated. Close and
// deadlines are the underlying stream's.
type deflateConn struct {
	net.Conn
	r io.Reader
	w *flate.Writer
}

// newDeflateConn returns stream compressed both ways; it reads the
// compressed bytes from in, a buffered reader over stream that may hold
// some of them already. (in is an io.ByteReader, so the inflater reads
// no further than its own blocks.)
//
// The inflater is github.com/klauspost/compress's: reading the content
// of a compressed connection is most of what compression costs this side,
// and it inflates realistic mail in about two thirds of the standard
// library's time (BenchmarkInflate).
func newDeflateConn(stream net.Conn, in *bufio.Reader) (*deflateConn, error) {
	w, err := flate.NewWriter(stream, flate.BestSpeed)
	if err != nil {
		return nil, err
	}
	return &deflateConn{Conn: stream, r: flate.NewReader(in), w: w}, nil
}

func (d *deflateConn) Read(p []byte) (int, error) {
	n, err := d.r.Read(p)
	var corrupt flate.CorruptInputError
	if errors.As(err, &corrupt) {
		err = fmt.Errorf("%w: invalid deflate stream", ErrMalformedResponse)
	}
	return n, err
}

// Write deflates p and flushes it to the stream as one or more complete
// blocks, so that the server can decode all of p now.
func (d *deflateConn) Write(p []byte) (int, error) {
	if _, err := d.w.Write(p); err != nil {
		return 0, err
	}
	if err := d.w.Flush(); err != nil {
		return 0, err
	}
	return len(p), nil
}

// prefixedConn is a net.Conn whose reads come from r.
type prefixedConn struct {
	net.Conn
	r io.Reader
}

func (c *prefixedConn) Read(p []byte) (int, error) { return c.r.Read(p) }
