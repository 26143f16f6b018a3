// Package loopback runs the listener of a test server that lives in the
// test process (package imapscript's scripts, the filters of package
// nocopyuid and package gmailtest in front of a Dovecot) on a free
// 127.0.0.1 port: it serves every connection it accepts in a goroutine
// of its own and, when the test ends, closes the listener and every
// connection still open, the server's own upstream ones included, and
// waits for those goroutines. What a server says on a connection is its
// own; the package reads and writes nothing.
package loopback

import (
	"net"
	"sync"
	"testing"
)

// Host is the address every Listener binds.
const Host = "127.0.0.1"

// Listener is a listener on a free loopback port, and the connections its
// server has open, until the end of the test that made it.
type Listener struct {
	ln net.Listener
	wg sync.WaitGroup // the goroutines of Serve and Go

	mu       sync.Mutex
	open     map[net.Conn]bool
	stopping bool
}

// Listen listens on a free loopback port and, in t's cleanup, closes the
// listener and every connection tracked and waits for the goroutines of
// Serve and Go. It fails t, with name leading the message, if it cannot
// listen.
func Listen(t testing.TB, name string) *Listener {
	t.Helper()
	ln, err := net.Listen("tcp", Host+":0")
	if err != nil {
		t.Fatalf("%s: listen: %v", name, err)
	}
	l := &Listener{ln: ln, open: map[net.Conn]bool{}}
	t.Cleanup(l.close)
	return l
}

// Serve accepts connections until the end of the test and runs serve
// with each, tracked, in a goroutine of its own; the connection is closed
// when serve returns. It returns at once.
func (l *Listener) Serve(serve func(c net.Conn)) {
	l.Go(func() {
		for {
			c, err := l.ln.Accept()
			if err != nil || !l.Track(c) {
				return
			}
			l.Go(func() {
				defer l.Drop(c)
				serve(c)
			})
		}
	})
}

// Go runs f in a goroutine of its own, which the end of the test waits
// for: one that must stop when the connections close.
func (l *Listener) Go(f func()) {
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		f()
	}()
}

// Track records conns, such as the connection to an upstream server that
// a serve function dialled, so that the end of the test closes them. Once
// the test is ending it closes them at once and reports false.
func (l *Listener) Track(conns ...net.Conn) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopping {
		for _, c := range conns {
			_ = c.Close()
		}
		return false
	}
	for _, c := range conns {
		l.open[c] = true
	}
	return true
}

// Drop closes conns and forgets them.
func (l *Listener) Drop(conns ...net.Conn) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
		delete(l.open, c)
	}
}

func (l *Listener) close() {
	_ = l.ln.Close()
	l.mu.Lock()
	l.stopping = true
	for c := range l.open {
		_ = c.Close()
	}
	l.mu.Unlock()
	l.wg.Wait()
}

// Addr is the listener's address, "127.0.0.1:port".
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Port is the listener's port.
func (l *Listener) Port() int { return l.ln.Addr().(*net.TCPAddr).Port }
