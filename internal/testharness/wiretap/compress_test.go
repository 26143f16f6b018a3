package wiretap

import (
	"bufio"
	"compress/flate"
	"context"
	"io"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// compressServer accepts one connection, answers its first line (a
// COMPRESS command) with status, and then swallows everything.
func compressServer(t *testing.T, status string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
			return
		}
		_, _ = io.WriteString(c, "* OK something first\r\nZ1 "+status+" go ahead\r\n")
		_, _ = io.Copy(io.Discard, c)
	}()
	return ln.Addr().String()
}

// negotiate dials through r and runs the COMPRESS exchange as a client.
func negotiate(t *testing.T, r *Recorder, addr string) net.Conn {
	t.Helper()
	c, err := r.Dial(addr)(context.Background(), "tcp", "")
	require.NoError(t, err)
	t.Cleanup(func() { c.Close() })
	_, err = io.WriteString(c, "Z1 COMPRESS DEFLATE\r\n")
	require.NoError(t, err)
	require.NoError(t, c.SetReadDeadline(time.Now().Add(5*time.Second)))
	br := bufio.NewReader(c)
	for {
		line, err := br.ReadString('\n')
		require.NoError(t, err)
		if line[0] == 'Z' {
			return c
		}
	}
}

// TestCompressedCommandsAreRecordedInflated: after the server's OK to
// COMPRESS, what the client writes is recorded inflated, one flushed
// command at a time, so a forbidden command is still seen.
func TestCompressedCommandsAreRecordedInflated(t *testing.T) {
	t.Parallel()
	var r Recorder
	c := negotiate(t, &r, compressServer(t, "OK"))
	w, err := flate.NewWriter(c, flate.BestSpeed)
	require.NoError(t, err)
	for _, cmd := range []string{"A1 EXAMINE INBOX\r\n", "A2 UID STORE 1 +FLAGS (\\Seen)\r\n"} {
		_, err := io.WriteString(w, cmd)
		require.NoError(t, err)
		require.NoError(t, w.Flush())
	}
	require.Equal(t, []string{"Z1 COMPRESS DEFLATE", "A1 EXAMINE INBOX", `A2 UID STORE 1 +FLAGS (\Seen)`}, r.Lines())
	require.True(t, Forbidden(r.Lines()[2]))
}

// TestUndecodableBytesAreForbidden: bytes after a COMPRESS OK that are
// not deflate are recorded as a line Forbidden matches, never skipped.
func TestUndecodableBytesAreForbidden(t *testing.T) {
	t.Parallel()
	var r Recorder
	c := negotiate(t, &r, compressServer(t, "OK"))
	_, err := io.WriteString(c, "A1 UID STORE 1 +FLAGS (\\Seen)\r\n")
	require.NoError(t, err)
	lines := r.Lines()
	require.True(t, slices.ContainsFunc(lines, Forbidden), "%q", lines)
	require.Contains(t, lines, undecodable)
}

// TestRefusedCompressKeepsPlainRecording: after a NO to COMPRESS the
// client goes on in plain text, and so does the recording.
func TestRefusedCompressKeepsPlainRecording(t *testing.T) {
	t.Parallel()
	var r Recorder
	c := negotiate(t, &r, compressServer(t, "NO"))
	_, err := io.WriteString(c, "A1 EXAMINE INBOX\r\n")
	require.NoError(t, err)
	require.Equal(t, []string{"Z1 COMPRESS DEFLATE", "A1 EXAMINE INBOX"}, r.Lines())
}

// TestInflaterFedWhileTheConnectionCloses: a client's last write and the
// connection's closing come from different goroutines; feeding while the
// inflater stops records what it can and never panics.
func TestInflaterFedWhileTheConnectionCloses(t *testing.T) {
	t.Parallel()
	for range 200 {
		f := startInflater(func([]byte) {})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range 20 {
				f.feed([]byte{0x00})
			}
		}()
		f.stop()
		<-done
		<-f.dead
	}
}
