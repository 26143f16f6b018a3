package wire

import (
	"bytes"
	"net"
	"sync/atomic"
)

// ByeWatch stands between a connection and another client reading it
// (go-imap, in package imapx) and notes a BYE response (RFC 3501 §7.1.5)
// that throttles (see Throttling). That client reads an unsolicited BYE
// and drops it, so without the watch a server that ends a session because
// the account exceeded a limit would look like one that dropped the
// connection, and the session would be opened again at once.
//
// It passes every byte through unchanged and keeps none of them: it reads
// the response stream just far enough to find where each response line
// starts — a literal's bytes ("{n}" at the end of a line, RFC 3501 §4.3)
// are skipped by their declared length, so message content can never be
// taken for a response — and only a line that starts with "* BYE" is
// looked at, bounded, and dropped once classified. What it keeps is the
// reason and the suggested delay.
//
// Reads go through one goroutine, the client's reader; Throttle may be
// called from any goroutine.
type ByeWatch struct {
	net.Conn

	// skip is what is left of the literal being read past.
	skip int64
	// started reports that the current response line's first bytes have
	// been judged; bye that the line is a BYE.
	started, bye bool
	// head holds the first bytes of the current line until they are
	// judged; line the BYE line being read, bounded; tail the last bytes
	// of the current line, where a literal is announced.
	head, line, tail []byte

	seen atomic.Pointer[Throttle]
}

// WatchBye returns c behind a ByeWatch.
func WatchBye(c net.Conn) *ByeWatch { return &ByeWatch{Conn: c} }

// maxByeLine bounds the BYE line a ByeWatch looks at.
const maxByeLine = 1024

// maxTail bounds the end of a line kept to find a literal announcement:
// "{" , nineteen digits, "+}" and CR.
const maxTail = 24

// byePrefix is how a BYE response line starts (compared ignoring case).
const byePrefix = "* BYE"

// Read implements net.Conn.
func (w *ByeWatch) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 {
		w.scan(p[:n])
	}
	return n, err
}

// Throttle returns what the last throttling BYE the watch saw said, and
// false when it saw none.
func (w *ByeWatch) Throttle() (Throttle, bool) {
	t := w.seen.Load()
	if t == nil {
		return Throttle{}, false
	}
	return *t, true
}

func (w *ByeWatch) scan(p []byte) {
	for len(p) > 0 {
		if w.skip > 0 {
			n := int64(len(p))
			if n > w.skip {
				n = w.skip
			}
			w.skip -= n
			p = p[n:]
			continue
		}
		seg := p
		end := bytes.IndexByte(p, '\n')
		if end >= 0 {
			seg, p = p[:end+1], p[end+1:]
		} else {
			p = nil
		}
		w.consume(seg, end >= 0)
	}
}

// consume takes one piece of a line; ended reports that it ends with the
// line's LF.
func (w *ByeWatch) consume(seg []byte, ended bool) {
	if !w.started {
		take := min(len(seg), len(byePrefix)+1-len(w.head))
		w.head = append(w.head, seg[:take]...)
		if len(w.head) > len(byePrefix) || ended {
			w.started = true
			w.bye = len(w.head) > len(byePrefix) && bytes.EqualFold(w.head[:len(byePrefix)], []byte(byePrefix)) &&
				(w.head[len(byePrefix)] == ' ' || w.head[len(byePrefix)] == '\r')
			if w.bye {
				w.line = append(w.line[:0], w.head...)
				w.line = append(w.line, seg[take:min(len(seg), take+maxByeLine-len(w.line))]...)
			}
		}
	} else if w.bye && len(w.line) < maxByeLine {
		w.line = append(w.line, seg[:min(len(seg), maxByeLine-len(w.line))]...)
	}
	if len(seg) >= maxTail {
		w.tail = append(w.tail[:0], seg[len(seg)-maxTail:]...)
	} else {
		w.tail = append(w.tail, seg...)
		if len(w.tail) > maxTail {
			w.tail = append(w.tail[:0], w.tail[len(w.tail)-maxTail:]...)
		}
	}
	if !ended {
		return
	}
	tail := bytes.TrimRight(w.tail, "\r\n")
	if i := bytes.LastIndexByte(tail, '{'); i >= 0 {
		if n, ok := literalAnnouncement(tail[i:]); ok {
			// The line goes on after the literal.
			w.skip = n
			w.tail = w.tail[:0]
			return
		}
	}
	if w.bye {
		if t := LineThrottle(string(bytes.TrimRight(w.line, "\r\n"))); t.Throttles() {
			w.seen.Store(&t)
		}
	}
	w.started, w.bye = false, false
	w.head, w.line, w.tail = w.head[:0], w.line[:0], w.tail[:0]
}
