package faultproxy

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialTimeout bounds the proxy's connection to the target.
const dialTimeout = 5 * time.Second

// Proxy forwards connections accepted on a loopback port to a target
// address, with faults armed by its methods. All methods are safe for
// concurrent use.
type Proxy struct {
	target string
	ln     net.Listener
	ctx    context.Context // canceled by Close; bounds dials
	cancel context.CancelFunc

	mu        sync.Mutex
	resumed   *sync.Cond // broadcast when stalls may have ended
	conns     map[*conn]struct{}
	next      []fault
	future    []fault
	up, down  Link // shapes for connections accepted later (Shape)
	refuse    bool
	stallAll  bool
	closed    bool
	heldUp    int64 // bytes read from clients that a stall keeps back
	heldDown  int64 // bytes read from servers that a stall keeps back
	wg        sync.WaitGroup
	live      atomic.Int64 // running goroutines, for leak tests
	accepted  atomic.Int64
	refused   atomic.Int64
	failed    atomic.Int64
	cuts      atomic.Int64
	upBytes   atomic.Int64
	downBytes atomic.Int64
}

// Start starts a proxy on 127.0.0.1 in front of target (host:port) and
// closes it in t.Cleanup. The target is dialed once per accepted
// connection; if that fails, the client connection is closed.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("faultproxy: listen: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &Proxy{target: target, ln: ln, ctx: ctx, cancel: cancel, conns: map[*conn]struct{}{}}
	p.resumed = sync.NewCond(&p.mu)
	p.goroutine(p.acceptLoop)
	t.Cleanup(p.Close)
	return p
}

// Addr returns the proxy's listening address, 127.0.0.1:port.
func (p *Proxy) Addr() string { return p.ln.Addr().String() }

// Target returns the address the proxy forwards to.
func (p *Proxy) Target() string { return p.target }

// goroutine runs f on a goroutine tracked by Close.
func (p *Proxy) goroutine(f func()) {
	p.wg.Add(1)
	p.live.Add(1)
	go func() {
		defer p.wg.Done()
		defer p.live.Add(-1)
		f()
	}()
}

func (p *Proxy) acceptLoop() {
	for {
		client, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failures (EMFILE and the like): back off briefly.
			select {
			case <-p.ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			continue
		}
		p.accepted.Add(1)
		p.mu.Lock()
		if p.closed || p.refuse {
			p.mu.Unlock()
			p.refused.Add(1)
			client.Close()
			continue
		}
		c := &conn{p: p, client: client, up: p.up, down: p.down, done: make(chan struct{})}
		for _, list := range [][]fault{p.next, p.future} {
			for _, f := range list {
				c.faults = append(c.faults, &armed{action: f.action, dir: f.dir, remaining: f.n})
			}
		}
		p.next = nil
		p.conns[c] = struct{}{}
		p.mu.Unlock()
		p.goroutine(c.run)
	}
}

// arm adds a fault for the scopes given.
func (p *Proxy) arm(scope Scope, f fault) {
	if f.n < 0 {
		f.n = 0
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if scope&Existing != 0 {
		for c := range p.conns {
			c.faults = append(c.faults, &armed{action: f.action, dir: f.dir, remaining: f.n})
		}
	}
	if scope&Next != 0 {
		p.next = append(p.next, f)
	}
	if scope&Future != 0 {
		p.future = append(p.future, f)
	}
}

// CutAfter closes connections in scope once n more bytes have passed in
// dir: exactly n bytes are forwarded, then both sides are closed. With
// n = 0 the next byte is not forwarded.
func (p *Proxy) CutAfter(scope Scope, dir Direction, n int64) {
	p.arm(scope, fault{action: cut, dir: dir, n: n})
}

// StallAfter freezes connections in scope once n more bytes have passed in
// dir: exactly n bytes are forwarded, then nothing more in either
// direction, with both sockets kept open, until Resume or Heal. The proxy
// stops reading from both sides, so their TCP buffers fill up.
func (p *Proxy) StallAfter(scope Scope, dir Direction, n int64) {
	p.arm(scope, fault{action: stall, dir: dir, n: n})
}

// CutAll closes every open connection now. Connections accepted later are
// not affected.
func (p *Proxy) CutAll() {
	p.mu.Lock()
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.mu.Unlock()
	for _, c := range conns {
		c.close(true)
	}
}

// StallAll freezes every open connection and every one accepted later,
// keeping the sockets open, until Resume or Heal: the network looks like
// a black hole.
func (p *Proxy) StallAll() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallAll = true
}

// Resume ends StallAll and unfreezes connections stalled by StallAfter;
// data held back is forwarded. StallAfter faults that have not triggered
// stay armed.
func (p *Proxy) Resume() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stallAll = false
	for c := range p.conns {
		c.stalled = false
		c.faults = removeSpent(c.faults, stall)
	}
	p.resumed.Broadcast()
}

// Refuse sets whether new connections are accepted and closed at once
// (the client sees the connection succeed and then end-of-file) instead of
// being forwarded. Open connections are not affected.
func (p *Proxy) Refuse(refuse bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.refuse = refuse
}

// Heal disarms every fault, on open connections too, stops refusing and
// resumes stalled connections: from then on the proxy is transparent.
func (p *Proxy) Heal() {
	p.mu.Lock()
	p.next, p.future, p.refuse = nil, nil, false
	for c := range p.conns {
		c.faults = nil
	}
	p.mu.Unlock()
	p.Resume()
}

// Stats are the proxy's counters since Start.
type Stats struct {
	// Accepted counts connections accepted, refused ones included.
	Accepted int64
	// Refused counts connections closed at once because of Refuse.
	Refused int64
	// DialFailed counts connections closed because the target could not
	// be dialed.
	DialFailed int64
	// Cut counts connections closed by CutAfter or CutAll.
	Cut int64
	// Active is the number of connections open now.
	Active int
	// ClientToServer and ServerToClient count the bytes forwarded.
	ClientToServer, ServerToClient int64
	// HeldClientToServer and HeldServerToClient count the bytes the proxy
	// has read and a stall keeps from the other side now.
	HeldClientToServer, HeldServerToClient int64
}

// Stats returns the current counters.
func (p *Proxy) Stats() Stats {
	p.mu.Lock()
	active, heldUp, heldDown := len(p.conns), p.heldUp, p.heldDown
	p.mu.Unlock()
	return Stats{
		Accepted:       p.accepted.Load(),
		Refused:        p.refused.Load(),
		DialFailed:     p.failed.Load(),
		Cut:            p.cuts.Load(),
		Active:         active,
		ClientToServer: p.upBytes.Load(),
		ServerToClient: p.downBytes.Load(),

		HeldClientToServer: heldUp,
		HeldServerToClient: heldDown,
	}
}

// Close stops listening, closes every connection and waits for the
// proxy's goroutines to end. Start registers it with t.Cleanup; calling it
// earlier, or again, is fine.
func (p *Proxy) Close() {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		p.wg.Wait()
		return
	}
	p.closed = true
	conns := make([]*conn, 0, len(p.conns))
	for c := range p.conns {
		conns = append(conns, c)
	}
	p.resumed.Broadcast()
	p.mu.Unlock()

	p.cancel()
	p.ln.Close()
	for _, c := range conns {
		c.close(false)
	}
	p.wg.Wait()
}
