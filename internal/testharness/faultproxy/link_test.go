package faultproxy

import (
	"io"
	"net"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestLinkLatencyIsOneWayEachWay: an echo round trip through a path with
// 40 ms each way takes 80 ms and some, not less.
func TestLinkLatencyIsOneWayEachWay(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.Shape(Both, Link{Latency: 40 * time.Millisecond})
	c := dial(t, p.Addr())
	start := time.Now()
	_, err := c.Write([]byte("ping"))
	require.NoError(t, err)
	readN(t, c, 4, 5*time.Second)
	rtt := time.Since(start)
	require.GreaterOrEqual(t, rtt, 80*time.Millisecond)
	require.Less(t, rtt, 400*time.Millisecond)
}

// TestLinkLatencyIsPipelined: ten writes 10 ms apart through 50 ms each
// way arrive back as a stream, the last about 90 + 100 ms after the first
// was sent; a proxy that turned latency into a round trip per chunk would
// take a second.
func TestLinkLatencyIsPipelined(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.Shape(Both, Link{Latency: 50 * time.Millisecond})
	c := dial(t, p.Addr())
	start := time.Now()
	go func() {
		for range 10 {
			if _, err := c.Write([]byte("0123456789")); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	first := readN(t, c, 10, 5*time.Second)
	firstAt := time.Since(start)
	readN(t, c, 90, 5*time.Second)
	lastAt := time.Since(start)
	require.Equal(t, "0123456789", string(first))
	require.GreaterOrEqual(t, firstAt, 100*time.Millisecond)
	require.GreaterOrEqual(t, lastAt, 190*time.Millisecond)
	require.Less(t, lastAt, 500*time.Millisecond, "latency serialized per chunk")
}

// TestLinkCapsThroughputPerDirection: 400 KB at 1 MB/s downstream take
// 0.4 s; the upstream, uncapped, carries its bytes at once.
func TestLinkCapsThroughputPerDirection(t *testing.T) {
	t.Parallel()
	const size = 400_000
	gotUp := make(chan time.Time, 1)
	srv := startServer(t, func(c net.Conn) {
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil {
			return
		}
		gotUp <- time.Now()
		_, _ = c.Write(payload(size))
	})
	p := Start(t, srv.ln.Addr().String())
	p.Shape(ServerToClient, Link{BytesPerSecond: 1_000_000})
	c := dial(t, p.Addr())
	start := time.Now()
	_, err := c.Write([]byte("send"))
	require.NoError(t, err)
	require.Equal(t, payload(size), readN(t, c, size, 10*time.Second))
	elapsed := time.Since(start)
	require.Less(t, (<-gotUp).Sub(start), 100*time.Millisecond, "the upstream is not capped")
	require.GreaterOrEqual(t, elapsed, 380*time.Millisecond)
	require.Less(t, elapsed, 1500*time.Millisecond)
}

// TestLinkKeepsFaultsExact: a cut through a shaped path still forwards
// exactly its budget.
func TestLinkKeepsFaultsExact(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	p.Shape(Both, Link{Latency: 5 * time.Millisecond, BytesPerSecond: 10_000_000})
	p.CutAfter(Future, ServerToClient, 70_000)
	c := dial(t, p.Addr())
	go func() { _, _ = c.Write(payload(200_000)) }()
	got, err := readAll(t, c, 5*time.Second)
	require.NoError(t, err)
	require.Equal(t, payload(200_000)[:70_000], got)
	eventually(t, func() bool { return p.Stats().Cut == 1 }, "cut not counted")
}

// TestShapeAppliesToLaterConnections: a connection keeps the shape it was
// accepted with.
func TestShapeAppliesToLaterConnections(t *testing.T) {
	t.Parallel()
	p := Start(t, startEcho(t))
	before := dial(t, p.Addr())
	eventually(t, func() bool { return p.Stats().Active == 1 }, "connection not registered")
	p.Shape(Both, Link{Latency: 100 * time.Millisecond})
	after := dial(t, p.Addr())
	rtt := func(c net.Conn) time.Duration {
		start := time.Now()
		_, err := c.Write([]byte("x"))
		require.NoError(t, err)
		readN(t, c, 1, 5*time.Second)
		return time.Since(start)
	}
	require.Less(t, rtt(before), 100*time.Millisecond)
	require.GreaterOrEqual(t, rtt(after), 200*time.Millisecond)
}
