package faultproxy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// testServer is a loopback server running handle per connection, closed
// with all its connections in t.Cleanup.
type testServer struct {
	ln    net.Listener
	mu    sync.Mutex
	conns []net.Conn
	wg    sync.WaitGroup
}

func startServer(t *testing.T, handle func(net.Conn)) *testServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	s := &testServer{ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.mu.Lock()
			s.conns = append(s.conns, c)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for _, c := range s.conns {
			c.Close()
		}
		s.mu.Unlock()
		s.wg.Wait()
	})
	return s
}

func echo(c net.Conn) { _, _ = io.Copy(c, c) }

func startEcho(t *testing.T) string { return startServer(t, echo).ln.Addr().String() }

func dial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	return c
}

func payload(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + i%26)
	}
	return b
}

// readAll reads until EOF or error, with a deadline, and returns the bytes
// and the error that ended it (nil for EOF).
func readAll(t *testing.T, c net.Conn, timeout time.Duration) ([]byte, error) {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(timeout)))
	var buf bytes.Buffer
	_, err := io.Copy(&buf, c)
	return buf.Bytes(), err
}

// readN reads exactly n bytes within timeout.
func readN(t *testing.T, c net.Conn, n int, timeout time.Duration) []byte {
	t.Helper()
	require.NoError(t, c.SetReadDeadline(time.Now().Add(timeout)))
	b := make([]byte, n)
	_, err := io.ReadFull(c, b)
	require.NoError(t, err)
	return b
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// eventually waits up to 5 s for cond.
func eventually(t *testing.T, cond func() bool, msg string) {
	t.Helper()
	poll.UntilTrue(t, 5*time.Second, msg, cond)
}

func TestForwardsAndCounts(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	c := dial(t, p.Addr())
	data := payload(100_000)
	go func() { _, _ = c.Write(data) }()
	require.Equal(t, data, readN(t, c, len(data), 5*time.Second))
	st := p.Stats()
	require.Equal(t, int64(1), st.Accepted)
	require.Equal(t, 1, st.Active)
	// The byte counters are updated just after each write completes.
	eventually(t, func() bool {
		st := p.Stats()
		return st.ClientToServer == int64(len(data)) && st.ServerToClient == int64(len(data))
	}, "bytes not counted")
	c.Close()
	eventually(t, func() bool { return p.Stats().Active == 0 }, "connection not forgotten")
	require.Zero(t, p.Stats().Cut)
}

func TestCutAfterServerToClientIsExact(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.CutAfter(Future, ServerToClient, 1000)
	c := dial(t, p.Addr())
	_, err := c.Write(payload(5000))
	require.NoError(t, err)
	got, err := readAll(t, c, 5*time.Second)
	require.NoError(t, err, "connection must end with EOF")
	require.Equal(t, payload(1000), got)
	eventually(t, func() bool { return p.Stats().Cut == 1 }, "cut not counted")
	require.Equal(t, int64(1000), p.Stats().ServerToClient)
}

func TestCutAfterExistingCountsFromArming(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	c := dial(t, p.Addr())
	_, err := c.Write(payload(500))
	require.NoError(t, err)
	readN(t, c, 500, 5*time.Second)

	p.CutAfter(Existing, ServerToClient, 300)
	_, err = c.Write(payload(1000))
	require.NoError(t, err)
	got, err := readAll(t, c, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, payload(1000)[:300], got)

	// Existing does not reach connections accepted later.
	c2 := dial(t, p.Addr())
	_, err = c2.Write(payload(2000))
	require.NoError(t, err)
	require.Equal(t, payload(2000), readN(t, c2, 2000, 5*time.Second))
}

func TestCutAfterClientToServer(t *testing.T) {
	t.Parallel()
	received := make(chan int, 1)
	srv := startServer(t, func(c net.Conn) {
		n, _ := io.Copy(io.Discard, c)
		received <- int(n)
	})
	p := Start(t, srv.ln.Addr().String())
	p.CutAfter(Future, ClientToServer, 100)
	c := dial(t, p.Addr())
	_, _ = c.Write(payload(1000))
	select {
	case n := <-received:
		require.Equal(t, 100, n)
	case <-time.After(5 * time.Second):
		t.Fatal("server connection not closed")
	}
	_, err := readAll(t, c, 5*time.Second)
	require.NoError(t, err, "client must see EOF")
}

func TestCutAfterBothCountsTheSum(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.CutAfter(Future, Both, 150)
	c := dial(t, p.Addr())
	_, err := c.Write(payload(100)) // 100 up, 50 left
	require.NoError(t, err)
	got, err := readAll(t, c, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, payload(50), got)
	// The counters are updated by the forwarding goroutines, which may
	// finish their bookkeeping just after the client saw the bytes.
	poll.Until(t, 5*time.Second, "150 bytes counted", func() (bool, string) {
		st := p.Stats()
		return st.ClientToServer+st.ServerToClient == 150, fmt.Sprintf("%d client to server, %d server to client", st.ClientToServer, st.ServerToClient)
	})
}

func TestNextScopeHitsOneConnection(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.CutAfter(Next, ServerToClient, 5)
	c1 := dial(t, p.Addr())
	_, err := c1.Write(payload(50))
	require.NoError(t, err)
	got, err := readAll(t, c1, 5*time.Second)
	require.NoError(t, err)
	require.Len(t, got, 5)

	c2 := dial(t, p.Addr())
	_, err = c2.Write(payload(50))
	require.NoError(t, err)
	require.Equal(t, payload(50), readN(t, c2, 50, 5*time.Second))
}

func TestStallAfterKeepsSocketOpenUntilResume(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.StallAfter(Future, ServerToClient, 10)
	c := dial(t, p.Addr())
	_, err := c.Write(payload(100))
	require.NoError(t, err)
	require.Equal(t, payload(10), readN(t, c, 10, 5*time.Second))

	got, err := readAll(t, c, 200*time.Millisecond)
	require.Empty(t, got)
	require.True(t, isTimeout(err), "want a timeout, not %v", err)
	// Frozen both ways: what the client sends now is held too.
	_, err = c.Write(payload(20))
	require.NoError(t, err)
	poll.UntilTrue(t, 5*time.Second, "the proxy read what the client sent", func() bool { return p.Stats().HeldClientToServer > 0 })
	require.Equal(t, int64(100), p.Stats().ClientToServer)

	p.Resume()
	require.Equal(t, append(payload(100)[10:], payload(20)...), readN(t, c, 110, 5*time.Second))
	require.Equal(t, 1, p.Stats().Active)
}

func TestStallAllAndResume(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	c1 := dial(t, p.Addr())
	_, err := c1.Write([]byte("ping"))
	require.NoError(t, err)
	readN(t, c1, 4, 5*time.Second)

	p.StallAll()
	c2 := dial(t, p.Addr()) // new connections are swallowed too
	for _, c := range []net.Conn{c1, c2} {
		_, err := c.Write([]byte("hello"))
		require.NoError(t, err)
		got, err := readAll(t, c, 150*time.Millisecond)
		require.Empty(t, got)
		require.True(t, isTimeout(err), "want a timeout, not %v", err)
	}
	p.Resume()
	for _, c := range []net.Conn{c1, c2} {
		require.Equal(t, []byte("hello"), readN(t, c, 5, 5*time.Second))
	}
}

func TestCutAllClosesOpenConnectionsOnly(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	c1, c2 := dial(t, p.Addr()), dial(t, p.Addr())
	eventually(t, func() bool { return p.Stats().Active == 2 }, "connections not registered")
	p.CutAll()
	for _, c := range []net.Conn{c1, c2} {
		got, err := readAll(t, c, 5*time.Second)
		require.NoError(t, err)
		require.Empty(t, got)
	}
	require.Equal(t, int64(2), p.Stats().Cut)
	c3 := dial(t, p.Addr())
	_, err := c3.Write([]byte("still works"))
	require.NoError(t, err)
	require.Equal(t, []byte("still works"), readN(t, c3, 11, 5*time.Second))
}

func TestRefuse(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.Refuse(true)
	c := dial(t, p.Addr())
	got, err := readAll(t, c, 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, got)
	require.Equal(t, int64(1), p.Stats().Refused)

	p.Refuse(false)
	c2 := dial(t, p.Addr())
	_, err = c2.Write([]byte("x"))
	require.NoError(t, err)
	readN(t, c2, 1, 5*time.Second)
}

func TestHealDisarmsEverything(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	c1 := dial(t, p.Addr())
	eventually(t, func() bool { return p.Stats().Active == 1 }, "connection not registered")
	p.CutAfter(All, ServerToClient, 1)
	p.Refuse(true)
	p.Heal()
	c2 := dial(t, p.Addr())
	for _, c := range []net.Conn{c1, c2} {
		_, err := c.Write(payload(10))
		require.NoError(t, err)
		require.Equal(t, payload(10), readN(t, c, 10, 5*time.Second))
	}
	require.Zero(t, p.Stats().Cut)
}

func TestDialFailureClosesClient(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	ln.Close()
	p := Start(t, dead)
	got, err := readAll(t, dial(t, p.Addr()), 5*time.Second)
	require.NoError(t, err)
	require.Empty(t, got)
	eventually(t, func() bool { return p.Stats().DialFailed == 1 }, "dial failure not counted")
}

// TestCloseLeavesNoGoroutines is not parallel: it compares the process's
// goroutine count before and after.
func TestCloseLeavesNoGoroutines(t *testing.T) {
	before := runtime.NumGoroutine()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var srvWG sync.WaitGroup
	var srvConns []net.Conn
	var mu sync.Mutex
	srvWG.Add(1)
	go func() {
		defer srvWG.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			srvConns = append(srvConns, c)
			mu.Unlock()
			srvWG.Add(1)
			go func() { defer srvWG.Done(); echo(c) }()
		}
	}()

	p := Start(t, ln.Addr().String())
	var clients []net.Conn
	for i := range 12 {
		c, err := net.Dial("tcp", p.Addr())
		require.NoError(t, err)
		clients = append(clients, c)
		_, err = c.Write(payload(100))
		require.NoError(t, err)
		switch i % 4 {
		case 0:
			p.StallAfter(Existing, ServerToClient, 0)
		case 1:
			p.CutAfter(Existing, ClientToServer, 0)
		case 2:
			p.StallAll()
		}
	}
	eventually(t, func() bool { return p.live.Load() > 0 }, "no goroutines started")
	p.Close()
	require.Zero(t, p.live.Load(), "proxy goroutines left after Close")
	require.Zero(t, p.Stats().Active)

	for _, c := range clients {
		c.Close()
	}
	ln.Close()
	mu.Lock()
	for _, c := range srvConns {
		c.Close()
	}
	mu.Unlock()
	srvWG.Wait()
	poll.Every(t, 5*time.Millisecond, 5*time.Second, "no goroutine leaked", func() bool {
		return runtime.NumGoroutine() <= before
	}, func() string {
		buf := make([]byte, 1<<20)
		return fmt.Sprintf("%d before, %d after:\n%s", before, runtime.NumGoroutine(), buf[:runtime.Stack(buf, true)])
	})
}
