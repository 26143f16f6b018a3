package wiretap

import (
	"bytes"
	"compress/flate"
	"io"
	"regexp"
	"sync"
)

// undecodable is the line recorded in place of client bytes that should
// have been a deflate stream and were not. Forbidden matches it.
const undecodable = "WIRETAP-UNDECODABLE-COMPRESSED-BYTES"

// compressCommand matches a client's COMPRESS DEFLATE command line
// (RFC 4978 §3), capturing its tag.
var compressCommand = regexp.MustCompile(`(?i)(?:^|\n)(\S+) COMPRESS DEFLATE\r\n`)

// compressWatch follows one connection's COMPRESS negotiation: the tag of
// a COMPRESS the client sent, the server's tagged answer to it, and, once
// that was OK, the inflater every later client write goes through.
type compressWatch struct {
	mu      sync.Mutex
	tag     string // of a COMPRESS awaiting its answer
	pending []byte // server bytes of an unfinished line while waiting
	inf     *inflater
	closed  bool
}

// sent looks at plain client bytes for a COMPRESS command.
func (w *compressWatch) sent(p []byte) {
	m := compressCommand.FindSubmatch(p)
	if m == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.tag, w.pending = string(m[1]), nil
}

// received looks at server bytes for the tagged answer to a COMPRESS.
// After an OK, client writes are inflated and recorded through record.
func (w *compressWatch) received(p []byte, record func([]byte)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.tag == "" || w.inf != nil {
		return
	}
	w.pending = append(w.pending, p...)
	for {
		i := bytes.IndexByte(w.pending, '\n')
		if i < 0 {
			return
		}
		line := bytes.TrimRight(w.pending[:i], "\r")
		w.pending = w.pending[i+1:]
		rest, ok := bytes.CutPrefix(line, []byte(w.tag+" "))
		if !ok {
			continue
		}
		w.tag, w.pending = "", nil
		if len(rest) >= 2 && bytes.EqualFold(rest[:2], []byte("OK")) && !w.closed {
			w.inf = startInflater(record)
		}
		return
	}
}

func (w *compressWatch) inflating() *inflater {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.inf
}

func (w *compressWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closed = true
	if w.inf != nil {
		w.inf.stop()
	}
}

// inflater inflates a client's deflate stream one write at a time: feed
// hands it a write and returns once every byte of it has been consumed
// and what it decodes to has been recorded. The client flushes after each
// command (RFC 4978 §4), so a command is recorded when it is written.
//
// in is never closed: a connection's last write and its closing come from
// different goroutines, so the end of the stream is a channel of its own
// (quit) that feed and the goroutine both watch.
type inflater struct {
	in      chan []byte   // a write's bytes, for the goroutine
	starved chan struct{} // the goroutine consumed them all
	dead    chan struct{} // the goroutine ended
	quit    chan struct{} // the connection closed
	once    sync.Once
	record  func([]byte)
}

func startInflater(record func([]byte)) *inflater {
	f := &inflater{in: make(chan []byte), starved: make(chan struct{}), dead: make(chan struct{}), quit: make(chan struct{}), record: record}
	go f.run()
	return f
}

func (f *inflater) run() {
	defer close(f.dead)
	src := &feeder{f: f}
	r := flate.NewReader(src)
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			f.record(buf[:n])
		}
		if err != nil {
			if !src.ended {
				f.record([]byte("\r\n" + undecodable + "\r\n"))
			}
			return
		}
	}
}

// feed inflates and records p.
func (f *inflater) feed(p []byte) {
	if len(p) == 0 {
		return
	}
	select {
	case f.in <- bytes.Clone(p):
	case <-f.dead:
		return
	case <-f.quit:
		return
	}
	select {
	case <-f.starved:
	case <-f.dead:
	}
}

func (f *inflater) stop() { f.once.Do(func() { close(f.quit) }) }

// feeder is the inflater's input: the writes fed to it, one after the
// other. It reports starvation once it has handed out a whole write and
// needs the next. (It is an io.ByteReader, so flate reads no further
// ahead than it decodes.)
type feeder struct {
	f     *inflater
	cur   []byte
	had   bool // cur came from a write that starvation was not yet reported for
	ended bool // the connection closed: end of stream, not corruption
}

func (s *feeder) next() bool {
	for len(s.cur) == 0 {
		if s.had {
			s.had = false
			s.f.starved <- struct{}{}
		}
		select {
		case p := <-s.f.in:
			s.cur, s.had = p, true
		case <-s.f.quit:
			s.ended = true
			return false
		}
	}
	return true
}

func (s *feeder) ReadByte() (byte, error) {
	if !s.next() {
		return 0, io.EOF
	}
	b := s.cur[0]
	s.cur = s.cur[1:]
	return b, nil
}

func (s *feeder) Read(p []byte) (int, error) {
	if !s.next() {
		return 0, io.EOF
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	return n, nil
}
