// Package wiretap records what an IMAP client sends, so a test can assert
// that a read-only session never sent anything that could change a mailbox
// or set \Seen. It reads the client's side only, so it needs a connection
// without TLS (or a recorder inside it).
//
// A connection that turns on COMPRESS=DEFLATE (RFC 4978) is recorded as
// the commands it sends, inflated: the recorder notices the client's
// COMPRESS command and the server's OK to it, and from then on inflates
// what the client writes before recording it (compress.go). What cannot be
// inflated is recorded as a line Forbidden matches, so it fails
// RequireReadOnly rather than hiding a command.
package wiretap

import (
	"bytes"
	"context"
	"net"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/require"
)

// Recorder records the bytes every connection it dials sends. The zero
// value is ready to use; it is safe for concurrent use.
type Recorder struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	conns []*bytes.Buffer // each connection's bytes, in dial order
	// continuations counts the lines servers began with "+".
	continuations int
}

// Dial returns a dial function (imapx.Endpoint.Dial) that connects to
// target — the address asked for when target is empty — and records what
// the client writes.
func (r *Recorder) Dial(target string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if target != "" {
			addr = target
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		own := &bytes.Buffer{}
		r.mu.Lock()
		r.conns = append(r.conns, own)
		r.mu.Unlock()
		return &recordingConn{Conn: c, r: r, own: own, rc: &compressWatch{}, lineStart: true}, nil
	}
}

// String returns everything recorded, across connections, in order.
func (r *Recorder) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.buf.String()
}

// Conns returns the recorded lines of each connection dialed, in dial
// order, split like Lines: how many commands each connection of a session
// sent, which one recording of all connections cannot tell.
func (r *Recorder) Conns() [][]string {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make([][]string, len(r.conns))
	for i, b := range r.conns {
		out[i] = splitLines(b.String())
	}
	return out
}

// Continuations counts the continuation requests (RFC 9051 §7.5) the
// servers of every connection dialed have sent: the lines they began with
// "+", such as IDLE's "+ idling". A test waits for one instead of sleeping
// while a command gets under way. It reads what the server sends as it
// arrives, so on a connection whose server compresses, or whose answers
// carry literals with lines that begin with "+", it counts those too; the
// sessions that wait with IDLE have neither.
func (r *Recorder) Continuations() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.continuations
}

// Reset forgets everything recorded, and the connections dialed so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf.Reset()
	r.conns = nil
	r.continuations = 0
}

// Lines returns the recorded lines (commands with their tags, literals and
// SASL responses as lines of their own), empty ones left out.
func (r *Recorder) Lines() []string { return splitLines(r.String()) }

func splitLines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\r\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

type recordingConn struct {
	net.Conn
	r   *Recorder
	own *bytes.Buffer
	rc  *compressWatch
	// lineStart reports whether the next byte read begins a server line.
	lineStart bool
}

func (c *recordingConn) Write(p []byte) (int, error) {
	if inf := c.rc.inflating(); inf != nil {
		inf.feed(p)
	} else {
		c.record(p)
		c.rc.sent(p)
	}
	return c.Conn.Write(p)
}

func (c *recordingConn) record(p []byte) {
	c.r.mu.Lock()
	c.r.buf.Write(p)
	c.own.Write(p)
	c.r.mu.Unlock()
}

func (c *recordingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 {
		c.rc.received(p[:n], c.record)
		c.countContinuations(p[:n])
	}
	return n, err
}

// countContinuations counts the server lines of p that begin with "+".
func (c *recordingConn) countContinuations(p []byte) {
	n := 0
	for _, b := range p {
		if c.lineStart && b == '+' {
			n++
		}
		c.lineStart = b == '\n'
	}
	if n > 0 {
		c.r.mu.Lock()
		c.r.continuations += n
		c.r.mu.Unlock()
	}
}

func (c *recordingConn) Close() error {
	c.rc.close()
	return c.Conn.Close()
}

// forbidden matches anything a read-only session must never send: a
// command that changes a mailbox or its messages, a read-write SELECT, or a
// body fetch that is not BODY.PEEK (RFC 9051 §6.4.5: BODY[] sets \Seen).
var forbidden = regexp.MustCompile(`(?i)^` + undecodable + `|^\S+ (UID )?(STORE|COPY|MOVE|EXPUNGE|APPEND|SELECT|CREATE|DELETE|RENAME|SUBSCRIBE|UNSUBSCRIBE|SETACL|SETMETADATA|CLOSE)\b|BODY\[|BINARY\[|RFC822(\.TEXT)?( |\))`)

// Forbidden reports whether one recorded line is something a read-only
// session must never send.
func Forbidden(line string) bool { return forbidden.MatchString(line) }

// RequireReadOnly fails t if r recorded anything forbidden and returns the
// recorded command names (upper case, "UID FETCH" as one name).
func RequireReadOnly(t testing.TB, r *Recorder) []string {
	t.Helper()
	var names []string
	for _, line := range r.Lines() {
		require.False(t, forbidden.MatchString(line), "forbidden on the wire: %q", line)
		f := strings.Fields(line)
		if len(f) >= 2 {
			name := strings.ToUpper(f[1])
			if name == "UID" && len(f) >= 3 {
				name += " " + strings.ToUpper(f[2])
			}
			names = append(names, name)
		}
	}
	return names
}
