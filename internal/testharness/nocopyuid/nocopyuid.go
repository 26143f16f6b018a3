// Package nocopyuid puts a real IMAP server behind a filter that removes
// the COPYUID response code (RFC 4315 §3) from its answers, so a client
// meets a server that carries UID MOVE and UID COPY without naming where
// the message went — what a server without UIDPLUS does. Dovecot cannot be
// made to do that: it answers COPYUID even when UIDPLUS is not among the
// capabilities it advertises. Started with dovecot.WithCapability listing
// MOVE and not UIDPLUS (Capabilities), the Dovecot behind the filter is a
// server that relocates with MOVE and names no placement.
//
// Only the server's answers are filtered, and only outside literals: a
// message's bytes pass through as they are, whatever they contain. The
// filter reads the protocol in the clear, so it also takes COMPRESS=DEFLATE
// and STARTTLS out of every capability listing; the client connects
// without TLS (connection security None and its opt-ins).
//
// Dial serves a client in this process (imapx.Endpoint.Dial); Start serves
// another process through a loopback listener.
package nocopyuid

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/mailfathom/mailfathom/internal/testharness/loopback"
)

// Capabilities is a capability list for dovecot.WithCapability: a server
// that offers MOVE but not UIDPLUS, so it has no UID EXPUNGE either and
// relocates with MOVE alone.
const Capabilities = "IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN MOVE"

// Filter counts the COPYUID codes it removed, across every connection it
// serves. The zero value is ready to use; it is safe for concurrent use.
type Filter struct {
	removed atomic.Int64
}

// Removed is how many COPYUID response codes the filter took out.
func (f *Filter) Removed() int { return int(f.removed.Load()) }

// Dial returns a dial function (imapx.Endpoint.Dial) that connects to
// target — the address asked for when target is empty — through the
// filter.
func (f *Filter) Dial(target string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if target != "" {
			addr = target
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return f.wrap(c), nil
	}
}

func (f *Filter) wrap(c net.Conn) *conn {
	return &conn{Conn: c, f: f, r: bufio.NewReader(c), atStart: true}
}

// conn is a connection to the server whose reads are filtered.
type conn struct {
	net.Conn
	f *Filter
	r *bufio.Reader

	mu      sync.Mutex
	out     []byte // filtered bytes not yet read
	literal int64  // bytes of a literal still to pass through
	atStart bool   // the next byte begins a response
	err     error  // the read error to report once out is drained
}

// Read implements net.Conn.
func (c *conn) Read(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for len(c.out) == 0 {
		if c.err != nil {
			err := c.err
			c.err = nil
			return 0, err
		}
		c.fill()
	}
	n := copy(p, c.out)
	c.out = c.out[n:]
	return n, nil
}

// fill reads the next piece of the server's answer: a literal's bytes as
// they are, or one line, filtered when it begins a response.
func (c *conn) fill() {
	if c.literal > 0 {
		buf := make([]byte, min(c.literal, 32<<10))
		n, err := c.r.Read(buf)
		c.out, c.literal, c.err = buf[:n], c.literal-int64(n), err
		return
	}
	line, err := c.r.ReadBytes('\n')
	c.err = err
	if len(line) == 0 {
		return
	}
	if c.atStart {
		line = c.filter(line)
	}
	c.out = line
	switch n, ok := literalAt(line); {
	case ok:
		c.literal, c.atStart = n, false
	default:
		// A line cut short by a read error continues where it stopped.
		c.atStart = bytes.HasSuffix(line, []byte("\n"))
	}
}

var (
	copyUID    = regexp.MustCompile(`(?i)^(\S+ OK )\[COPYUID [^\]]*\] ?`)
	capability = regexp.MustCompile(`(?i)\bCAPABILITY ([^\]\r\n]*)`)
	literal    = regexp.MustCompile(`\{(\d+)\+?\}\r?\n$`)
)

// unreadable are the capabilities whose use would hide the protocol from
// the filter.
var unreadable = map[string]bool{"COMPRESS=DEFLATE": true, "STARTTLS": true}

// filter removes a COPYUID code and the unreadable capabilities from one
// line that begins a response.
func (c *conn) filter(line []byte) []byte {
	if loc := copyUID.FindSubmatchIndex(line); loc != nil {
		c.f.removed.Add(1)
		line = append(append([]byte{}, line[:loc[3]]...), line[loc[1]:]...)
	}
	return capability.ReplaceAllFunc(line, func(m []byte) []byte {
		name, list, _ := strings.Cut(string(m), " ")
		var kept []string
		for _, c := range strings.Fields(list) {
			if !unreadable[strings.ToUpper(c)] {
				kept = append(kept, c)
			}
		}
		return []byte(name + " " + strings.Join(kept, " "))
	})
}

// literalAt returns the length of the literal line announces at its end.
func literalAt(line []byte) (int64, bool) {
	m := literal.FindSubmatch(line)
	if m == nil {
		return 0, false
	}
	n, err := strconv.ParseInt(string(m[1]), 10, 64)
	return n, err == nil
}

// Proxy is a loopback listener that serves every connection it accepts
// through the filter, from the server at its target.
type Proxy struct {
	Filter
	ln     *loopback.Listener
	target string
}

// Start listens on a free loopback port and proxies to target (host:port
// of a server's plain listener) until the test ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p := &Proxy{ln: loopback.Listen(t, "nocopyuid"), target: target}
	p.ln.Serve(p.serve)
	return p
}

// Addr is the listener's address, "127.0.0.1:port".
func (p *Proxy) Addr() string { return p.ln.Addr() }

// Host is "127.0.0.1".
func (p *Proxy) Host() string { return loopback.Host }

// Port is the listener's port.
func (p *Proxy) Port() int { return p.ln.Port() }

// serve connects client to the target, its answers filtered, until
// either end closes.
func (p *Proxy) serve(client net.Conn) {
	server, err := net.Dial("tcp", p.target)
	if err != nil || !p.ln.Track(server) {
		return
	}
	p.ln.Go(func() { p.pipe(client, client, server) })
	p.pipe(server, p.wrap(server), client)
}

// pipe copies from src to dst until either end closes, then closes both
// ends of the pair (from is src's connection).
func (p *Proxy) pipe(from net.Conn, src interface{ Read([]byte) (int, error) }, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	p.ln.Drop(from, dst)
}
