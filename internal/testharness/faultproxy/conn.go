package faultproxy

import (
	"io"
	"net"
	"sync"
)

// bufSize is the most a forwarding goroutine reads at once.
const bufSize = 32 << 10

// conn is one proxied connection. The fields after client are guarded by
// the proxy's mutex.
type conn struct {
	p *Proxy
	// up and down are the Link shapes the connection was accepted with.
	up, down Link
	done     chan struct{} // closed when the connection closes
	client   net.Conn

	server    net.Conn
	faults    []*armed
	stalled   bool // a StallAfter fault triggered
	cutting   bool // a CutAfter fault triggered; closing
	closed    bool
	closeOnce sync.Once
}

func (c *conn) run() {
	d := net.Dialer{Timeout: dialTimeout}
	server, err := d.DialContext(c.p.ctx, "tcp", c.p.target)
	if err != nil {
		c.p.failed.Add(1)
		c.close(false)
		return
	}
	c.p.mu.Lock()
	c.server = server
	closed := c.closed
	c.p.mu.Unlock()
	if closed {
		server.Close()
		return
	}
	var wg sync.WaitGroup
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.forward(c.shaped(c.client, c.up), server, ClientToServer)
	}()
	go func() {
		defer wg.Done()
		c.forward(c.shaped(server, c.down), c.client, ServerToClient)
	}()
	wg.Wait()
}

// shaped returns src as the far end of link sees it: src itself for a
// zero Link, otherwise a shaper whose pump runs on a tracked goroutine.
func (c *conn) shaped(src net.Conn, link Link) io.Reader {
	if link.zero() {
		return src
	}
	s := newShaper(link, c.done)
	c.p.goroutine(func() { s.pump(src) })
	return s
}

// forward copies src to dst, consulting the faults before every write.
//
// When the other direction is cutting the connection, forward returns
// without closing it: the cut closes it once its last allowed bytes are
// written, and counts itself.
func (c *conn) forward(src io.Reader, dst net.Conn, dir Direction) {
	leave := true
	defer func() {
		if leave {
			c.close(false)
		}
	}()
	buf := make([]byte, bufSize)
	for {
		n, err := src.Read(buf)
		data := buf[:n]
		for len(data) > 0 {
			allowed, act, ok := c.reserve(dir, int64(len(data)))
			if !ok {
				leave = !c.beingCut()
				return
			}
			if allowed > 0 {
				w, werr := dst.Write(data[:allowed])
				c.count(dir, int64(w))
				if werr != nil {
					return
				}
				data = data[allowed:]
			}
			if act == cut {
				c.close(true)
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// reserve waits while the connection is stalled, then returns how many of
// want bytes may be forwarded in dir and, when that spends a fault's
// budget, the action to take after forwarding them. The bytes are deducted
// from every fault counting dir at once, so the two directions of a Both
// fault cannot overshoot it together, and a triggered fault stops the other
// direction at once: a stall makes its next reserve wait, a cut makes it
// return false. ok is false once the connection is closing or the proxy is
// closed.
func (c *conn) reserve(dir Direction, want int64) (allowed int64, act action, ok bool) {
	p := c.p
	p.mu.Lock()
	defer p.mu.Unlock()
	if (c.stalled || p.stallAll) && !c.closed && !p.closed {
		held := &p.heldDown
		if dir == ClientToServer {
			held = &p.heldUp
		}
		*held += want
		for (c.stalled || p.stallAll) && !c.closed && !p.closed {
			p.resumed.Wait()
		}
		*held -= want
	}
	if c.closed || c.cutting || p.closed {
		return 0, 0, false
	}
	allowed = want
	for _, f := range c.faults {
		if f.dir&dir != 0 && f.remaining < allowed {
			allowed = f.remaining
		}
	}
	for _, f := range c.faults {
		if f.dir&dir == 0 {
			continue
		}
		f.remaining -= allowed
		if f.remaining == 0 && (act == 0 || f.action == cut) {
			act = f.action // a cut wins over a stall
		}
	}
	switch act {
	case cut:
		c.cutting = true
	case stall:
		c.stalled = true
	}
	return allowed, act, true
}

// beingCut reports that a direction reserved the bytes that end the
// connection by a cut and is about to close it.
func (c *conn) beingCut() bool {
	c.p.mu.Lock()
	defer c.p.mu.Unlock()
	return c.cutting && !c.closed
}

func (c *conn) count(dir Direction, n int64) {
	if dir == ClientToServer {
		c.p.upBytes.Add(n)
	} else {
		c.p.downBytes.Add(n)
	}
}

// close closes both sides once and forgets the connection. byCut counts
// it in Stats.Cut if this call is the one that closes it.
func (c *conn) close(byCut bool) {
	c.closeOnce.Do(func() {
		if byCut {
			c.p.cuts.Add(1)
		}
		p := c.p
		p.mu.Lock()
		c.closed = true
		close(c.done)
		server := c.server
		delete(p.conns, c)
		p.resumed.Broadcast()
		p.mu.Unlock()
		c.client.Close()
		if server != nil {
			server.Close()
		}
	})
}

// removeSpent drops faults of kind act whose budget is spent.
func removeSpent(faults []*armed, act action) []*armed {
	out := faults[:0]
	for _, f := range faults {
		if !(f.action == act && f.remaining == 0) {
			out = append(out, f)
		}
	}
	return out
}
