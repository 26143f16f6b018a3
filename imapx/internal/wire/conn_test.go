package wire

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"
)

// TestCommandsRefused: the command layer sends nothing outside its list,
// and the fetch nothing but FLAGS, UID and MODSEQ.
func TestCommandsRefused(t *testing.T) {
	c := &Conn{sock: &Socket{}}
	for _, name := range []string{"STORE", "UID STORE", "SELECT", "EXPUNGE", "COPY", "APPEND", "FETCH", "UID EXPUNGE"} {
		err := c.run(context.Background(), time.Second, name, "", nil)
		require.Error(t, err, name)
		require.Zero(t, c.tags, "nothing was sent")
	}
	for _, items := range [][]FetchItem{{"BODY[]"}, {"FLAGS", "BODY.PEEK[HEADER]"}, {"RFC822"}, {"ENVELOPE"}, {}} {
		_, err := FlagsFetch{Set: "1:5", Items: items}.args()
		require.ErrorIs(t, err, errFetchRequest, "%v", items)
	}
	_, err := FlagsFetch{Set: "2:*", Items: []FetchItem{FetchFlags}}.args()
	require.Error(t, err, "the only set with * is the whole folder")
	args, err := FlagsFetch{Set: WholeFolder, Items: []FetchItem{FetchFlags, FetchUID}, ChangedSince: 9}.args()
	require.NoError(t, err)
	require.Equal(t, "1:* (FLAGS UID) (CHANGEDSINCE 9)", args)
	_, err = FlagsFetch{Set: "1", Items: []FetchItem{FetchFlags}, Vanished: true}.args()
	require.Error(t, err, "VANISHED needs CHANGEDSINCE")
	args, err = FlagsFetch{Set: "1:5,7", Items: []FetchItem{FetchFlags, FetchUID, FetchModSeq}, ChangedSince: 9, Vanished: true}.args()
	require.NoError(t, err)
	require.Equal(t, "1:5,7 (FLAGS UID MODSEQ) (CHANGEDSINCE 9 VANISHED)", args)
	require.True(t, errors.Is(&malformedError{"x"}, ErrMalformedResponse))
}

// TestCompressNeedsTheCapability: a server that did not advertise
// COMPRESS=DEFLATE is not asked.
func TestCompressNeedsTheCapability(t *testing.T) {
	c := &Conn{sock: &Socket{}, caps: imap.CapSet{imap.CapIMAP4rev1: {}}}
	require.ErrorIs(t, c.Compress(context.Background(), time.Second), ErrCompressionUnavailable)
	require.Zero(t, c.tags, "nothing was sent")
	require.False(t, c.Compressed())
}

// TestDeflateConn: what one side writes, each write flushed, the other
// side reads at once, before anything more is written; a stream that is
// not deflate is a malformed response.
func TestDeflateConn(t *testing.T) {
	a, b := net.Pipe()
	t.Cleanup(func() { a.Close(); b.Close() })
	ca, err := newDeflateConn(a, bufio.NewReader(a))
	require.NoError(t, err)
	cb, err := newDeflateConn(b, bufio.NewReader(b))
	require.NoError(t, err)
	require.NoError(t, b.SetReadDeadline(time.Now().Add(5*time.Second)))
	msgs := []string{"R1 EXAMINE INBOX\r\n", strings.Repeat("* 1 FETCH (FLAGS ())\r\n", 500)}
	go func() {
		// One writer, as on a connection: each write is flushed whole.
		for _, msg := range msgs {
			if _, err := ca.Write([]byte(msg)); err != nil {
				return
			}
		}
	}()
	for _, msg := range msgs {
		got := make([]byte, len(msg))
		_, err := io.ReadFull(cb, got)
		require.NoError(t, err)
		require.Equal(t, msg, string(got))
	}

	x, y := net.Pipe()
	t.Cleanup(func() { x.Close(); y.Close() })
	cy, err := newDeflateConn(y, bufio.NewReader(y))
	require.NoError(t, err)
	go func() { _, _ = x.Write([]byte("* OK not deflate at all\r\n")) }()
	_, err = cy.Read(make([]byte, 100))
	require.ErrorIs(t, err, ErrMalformedResponse)
}
