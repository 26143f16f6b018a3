package sasl

import (
	"net"
	"sync/atomic"
)

// EmptyResponseConn works around a bug of go-imap v2.0.0-beta.8
// (emersion/go-imap#760, fix proposed in #761): imapclient's Authenticate
// sends an empty SASL continuation response as the line "=", which RFC 4959
// §3 defines only for an empty initial response on the AUTHENTICATE command
// line. In a continuation the response is plain base64 (RFC 9051 §6.2.2),
// so an empty one is an empty line, and Dovecot answers "=" with
// "BAD Invalid base64 data in continued response". Every SCRAM exchange
// ends with such an empty response (the answer to the server's signature,
// RFC 5802 §5), and so does XOAUTH2's answer to an error challenge.
//
// Put it between the (TLS) stream and imapclient.New; it rewrites a write
// of exactly "=\r\n" to "\r\n" until Stop is called. imapclient writes a
// SASL response by itself with a flush of an empty buffer, so that write is
// a whole line; no IMAP command line is "=" (every command starts with its
// tag). Call Stop once authentication has ended, after which every write
// passes unchanged. Remove it when go-imap sends empty continuations
// correctly; TestGoIMAPSendsEmptyContinuationAsEquals says when.
type EmptyResponseConn struct {
	net.Conn
	stopped atomic.Bool
}

// FixEmptyResponses wraps c; see EmptyResponseConn.
func FixEmptyResponses(c net.Conn) *EmptyResponseConn {
	return &EmptyResponseConn{Conn: c}
}

// Write passes p to the connection, sending an empty line for "=\r\n"
// until Stop.
func (c *EmptyResponseConn) Write(p []byte) (int, error) {
	if c.stopped.Load() || string(p) != "=\r\n" {
		return c.Conn.Write(p)
	}
	n, err := c.Conn.Write(p[1:])
	if n == len(p)-1 {
		return len(p), err
	}
	return 0, err
}

// Stop ends the rewriting. Safe to call more than once and concurrently
// with Write.
func (c *EmptyResponseConn) Stop() { c.stopped.Store(true) }
