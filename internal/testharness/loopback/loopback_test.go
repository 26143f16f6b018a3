package loopback_test

import (
	"io"
	"net"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/loopback"
)

// TestEndOfTestClosesEveryConnection: when the test that listened ends,
// the connections accepted and the upstream ones the server tracked are
// closed, serve has returned, and a connection tracked later is closed
// at once.
func TestEndOfTestClosesEveryConnection(t *testing.T) {
	t.Parallel()
	upstream, far := net.Pipe()
	var l *loopback.Listener
	var client net.Conn
	var returned atomic.Bool
	t.Run("server", func(t *testing.T) {
		l = loopback.Listen(t, "loopback")
		tracked := make(chan struct{})
		l.Serve(func(c net.Conn) {
			if !l.Track(upstream) {
				t.Errorf("Track refused a connection before the end of the test")
			}
			close(tracked)
			_, _ = io.Copy(io.Discard, c)
			returned.Store(true)
		})
		var err error
		client, err = net.Dial("tcp", l.Addr())
		require.NoError(t, err)
		require.Equal(t, client.RemoteAddr().(*net.TCPAddr).Port, l.Port())
		<-tracked
	})
	require.True(t, returned.Load(), "serve returned before the end of the test")
	_, err := client.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the accepted connection is closed")
	_, err = far.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "the tracked upstream connection is closed")

	late, lateFar := net.Pipe()
	require.False(t, l.Track(late))
	_, err = lateFar.Read(make([]byte, 1))
	require.ErrorIs(t, err, io.EOF, "a connection tracked after the end is closed at once")
}
