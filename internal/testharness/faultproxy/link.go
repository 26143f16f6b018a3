package faultproxy

import (
	"io"
	"time"
)

// Link shapes one direction of the connections a Proxy forwards like a
// long, narrow network path: every byte arrives Latency after it was
// sent, and no more than BytesPerSecond pass per second. The two are
// independent, as on a real path: latency is a fixed delay that data in
// flight shares, not a round trip per chunk, so a stream of writes
// arrives as a stream, each piece Latency after it left.
//
// The zero Link is a plain loopback connection.
type Link struct {
	// Latency is the one-way delay added to every byte. Zero adds none.
	Latency time.Duration
	// BytesPerSecond caps the throughput; data beyond it queues, in
	// order. Zero means no cap. (100 Mbit/s is 12_500_000.)
	BytesPerSecond int64
}

func (l Link) zero() bool { return l.Latency <= 0 && l.BytesPerSecond <= 0 }

// maxInFlight bounds the chunks a shaped direction has read from its
// source and not yet delivered. Beyond it the proxy stops reading, so the
// sender meets TCP's flow control as it would at a full link. 64 chunks of
// at most 32 KiB hold 2 MiB, more than the 250 KB a 100 Mbit/s path with
// 20 ms of latency keeps in flight.
const maxInFlight = 64

// chunk is data read from a source, due at the other end at due.
type chunk struct {
	data []byte
	due  time.Time
	err  error // the read's error, after data
}

// shaper delays what one direction reads from its source by the Link. A
// pump goroutine reads from the source as fast as the Link's queue allows
// and stamps each chunk with its delivery time; Read hands the chunks over
// no earlier than that time. It implements io.Reader for forward, so the
// faults (which count bytes as they are delivered) work as without
// shaping.
type shaper struct {
	link  Link
	queue chan chunk
	done  <-chan struct{} // closed when the connection closes

	// free is when the link has finished sending what was queued: the
	// earliest a new chunk can start to go out. Used by the pump only.
	free time.Time

	cur []byte // the undelivered rest of the current chunk
	err error  // the error that followed the current chunk
}

func newShaper(link Link, done <-chan struct{}) *shaper {
	return &shaper{link: link, queue: make(chan chunk, maxInFlight), done: done}
}

// pump reads src until it fails or the connection closes.
func (s *shaper) pump(src io.Reader) {
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		c := chunk{err: err}
		now := time.Now()
		if n > 0 {
			c.data = append([]byte(nil), buf[:n]...)
			start := now
			if s.free.After(start) {
				start = s.free
			}
			s.free = start
			if s.link.BytesPerSecond > 0 {
				s.free = start.Add(time.Duration(int64(n) * int64(time.Second) / s.link.BytesPerSecond))
			}
			c.due = s.free.Add(s.link.Latency)
		} else {
			// An end of stream follows the data before it.
			c.due = now.Add(s.link.Latency)
			if s.free.Add(s.link.Latency).After(c.due) {
				c.due = s.free.Add(s.link.Latency)
			}
		}
		select {
		case s.queue <- c:
		case <-s.done:
			return
		}
		if err != nil {
			return
		}
	}
}

// Read returns the next chunk's data once it is due.
func (s *shaper) Read(p []byte) (int, error) {
	if len(s.cur) == 0 {
		if s.err != nil {
			return 0, s.err
		}
		var c chunk
		select {
		case c = <-s.queue:
		case <-s.done:
			return 0, io.ErrClosedPipe
		}
		if d := time.Until(c.due); d > 0 {
			t := time.NewTimer(d)
			select {
			case <-t.C:
			case <-s.done:
				t.Stop()
				return 0, io.ErrClosedPipe
			}
		}
		s.cur, s.err = c.data, c.err
		if len(s.cur) == 0 {
			return 0, s.err
		}
	}
	n := copy(p, s.cur)
	s.cur = s.cur[n:]
	if len(s.cur) == 0 && s.err != nil {
		return n, s.err
	}
	return n, nil
}

// Shape makes every connection accepted from now on behave like a path
// with link in dir (ServerToClient, ClientToServer or Both). Connections
// open now keep the shape they were accepted with. A zero Link ends the
// shaping of dir for later connections.
func (p *Proxy) Shape(dir Direction, link Link) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if dir&ServerToClient != 0 {
		p.down = link
	}
	if dir&ClientToServer != 0 {
		p.up = link
	}
}
