package imapx_test

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
)

// flightWatch wraps a plaintext connection and records, for every UID
// FETCH the client sent, how many UID FETCH commands had been sent when
// the server's tagged answer to it arrived: above the command's own
// position, the next one was in flight beside it.
type flightWatch struct {
	mu       sync.Mutex
	sent     []string       // the UID FETCH command lines, in order
	answered map[string]int // tag → len(sent) when its tagged answer arrived
	tail     string         // the end of what the server sent, for answers split across reads
}

var fetchLine = regexp.MustCompile(`(?m)^(\S+) UID FETCH .*$`)

func (f *flightWatch) dial(target string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, target)
		if err != nil {
			return nil, err
		}
		return &flightConn{Conn: c, f: f}, nil
	}
}

type flightConn struct {
	net.Conn
	f *flightWatch
}

func (c *flightConn) Write(p []byte) (int, error) {
	c.f.mu.Lock()
	c.f.sent = append(c.f.sent, fetchLine.FindAllString(strings.ReplaceAll(string(p), "\r", ""), -1)...)
	c.f.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *flightConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	window := c.f.tail + string(p[:n])
	for _, line := range c.f.sent {
		tag := strings.Fields(line)[0]
		if _, done := c.f.answered[tag]; !done && strings.Contains(window, "\n"+tag+" OK") {
			c.f.answered[tag] = len(c.f.sent)
		}
	}
	c.f.tail = window[max(0, len(window)-64):]
	return n, err
}

// answeredWith returns how many UID FETCH commands were sent when the
// answer to the one whose line contains item arrived, and that command's
// position (1-based).
func (f *flightWatch) answeredWith(t *testing.T, item string) (sentThen, position int) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for i, line := range f.sent {
		if strings.Contains(line, item) {
			n, ok := f.answered[strings.Fields(line)[0]]
			require.True(t, ok, "%q was answered", line)
			return n, i + 1
		}
	}
	t.Fatalf("no UID FETCH of %s among %q", item, f.sent)
	return 0, 0
}

// TestFetchBodiesThenMetadata: the following batch's metadata FETCH is on
// the wire before the bodies' tagged answer arrives, the bodies come
// byte-identical and in order, the metadata is what FetchMetadata returns,
// and nothing is marked \Seen.
func TestFetchBodiesThenMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, want := b.seed("INBOX", []int{300_000, 200_000, 250_000, 1_000, 2_000, 3_000, 4_000})
	batch, next := uids[:3], uids[3:]
	f := &flightWatch{answered: map[string]int{}}
	ep := b.endpoint(imapx.None)
	ep.Dial = f.dial(b.srv.Addr())
	s := b.open(ep, imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	var got []imapx.Body
	meta, metaErr, err := s.FetchBodiesThenMetadata(b.ctx, batch, 1<<20, collect(&got), next)
	require.NoError(t, err)
	require.NoError(t, metaErr)
	require.Len(t, got, len(batch))
	for i, body := range got {
		require.Equal(t, batch[i], body.UID)
		require.True(t, bytes.Equal(want[body.UID], body.Raw), "UID %d differs", body.UID)
	}
	alone, err := s.FetchMetadata(b.ctx, next)
	require.NoError(t, err)
	require.Equal(t, alone, meta)

	sentThen, position := f.answeredWith(t, "BODY.PEEK[]")
	require.Greater(t, sentThen, position, "the metadata FETCH was sent before the bodies were answered")
	b.requireUnseen("INBOX", uids...)
}

// TestFetchBodiesThenMetadataCallbackError: fn's error ends the bodies,
// comes back as is, the metadata's answers are read to their end, and the
// connection stays in step.
func TestFetchBodiesThenMetadataCallbackError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, _ := b.seed("INBOX", slices.Repeat([]int{20_000}, 30))
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	stop := errors.New("stop here")
	calls := 0
	meta, metaErr, err := s.FetchBodiesThenMetadata(b.ctx, uids[:20], 1<<20, func(imapx.Body) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	}, uids[20:])
	require.Same(t, stop, err)
	require.NoError(t, metaErr)
	require.Nil(t, meta)
	require.Equal(t, 2, calls)
	md, err := s.FetchMetadata(b.ctx, uids[:3])
	require.NoError(t, err)
	require.Len(t, md, 3)
}

// TestFetchBodiesThenMetadataCutInTheMetadata: a connection lost after
// the last body, while the metadata arrives, leaves the bodies delivered
// and reports a transient failure: the metadata's (metaErr) where the
// server had completed the bodies' command, else the bodies' (err), as
// Dovecot completes that command only after the metadata's answers.
func TestFetchBodiesThenMetadataCutInTheMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, _ := b.seed("INBOX", append(slices.Repeat([]int{50_000}, 4), slices.Repeat([]int{500}, 400)...))
	p := faultproxy.Start(t, b.srv.Addr())
	ep := b.endpoint(imapx.None)
	ep.Dial = (&recorder{}).Dial(p.Addr())
	s := b.open(ep, imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	// The four bodies are 200 KB; 400 envelopes are well over 20 KB.
	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 220_000)
	var got []imapx.Body
	meta, metaErr, err := s.FetchBodiesThenMetadata(b.ctx, uids[:4], 1<<20, collect(&got), uids[4:])
	require.Len(t, got, 4, "every body arrived before the cut")
	require.Nil(t, meta)
	failed := cmp.Or(err, metaErr)
	require.Error(t, failed)
	require.True(t, imapx.IsTransient(failed), "%v", failed)
	require.EqualValues(t, 1, p.Stats().Cut)
}

// TestFetchBodiesThenMetadataAlone: without bodies it is FetchMetadata,
// without a following batch FetchBodies.
func TestFetchBodiesThenMetadataAlone(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, want := b.seed("INBOX", []int{1_000, 2_000})
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	var got []imapx.Body
	meta, metaErr, err := s.FetchBodiesThenMetadata(b.ctx, nil, 1<<20, collect(&got), uids)
	require.NoError(t, err)
	require.NoError(t, metaErr)
	require.Len(t, meta, 2)
	require.Empty(t, got)

	meta, metaErr, err = s.FetchBodiesThenMetadata(b.ctx, uids, 1<<20, collect(&got), nil)
	require.NoError(t, err)
	require.NoError(t, metaErr)
	require.Nil(t, meta)
	require.Len(t, got, 2)
	require.Equal(t, want[uids[1]], got[1].Raw)
}

// TestCyrusFetchBodiesThenMetadata: Cyrus answers the two commands one
// after the other; the bodies and the metadata are what they are on
// Dovecot, and a cut while the metadata arrives leaves every body
// delivered with a transient failure.
func TestCyrusFetchBodiesThenMetadata(t *testing.T) {
	t.Parallel()
	b := setupCyrus(t, nil)
	var uids []uint32
	want := map[uint32][]byte{}
	for i := range 404 {
		size := 500
		if i < 4 {
			size = 50_000
		}
		raw := message(i, size)
		uid := uint32(b.user.Append("INBOX", raw, time.Time{}))
		uids, want[uid] = append(uids, uid), raw
	}
	p := faultproxy.Start(t, b.srv.Addr())
	ep := b.endpoint(imapx.None)
	ep.Dial = (&recorder{}).Dial(p.Addr())
	s := b.open(ep)
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	var got []imapx.Body
	meta, metaErr, err := s.FetchBodiesThenMetadata(b.ctx, uids[:4], 1<<20, collect(&got), uids[4:])
	require.NoError(t, err)
	require.NoError(t, metaErr)
	require.Len(t, got, 4)
	for i, body := range got {
		require.Equal(t, uids[i], body.UID)
		require.True(t, bytes.Equal(want[body.UID], body.Raw), "UID %d differs", body.UID)
	}
	alone, err := s.FetchMetadata(b.ctx, uids[4:])
	require.NoError(t, err)
	require.Equal(t, alone, meta)

	// The four bodies are 200 KB; 400 envelopes are well over 20 KB.
	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 220_000)
	got = nil
	meta, metaErr, err = s.FetchBodiesThenMetadata(b.ctx, uids[:4], 1<<20, collect(&got), uids[4:])
	require.Len(t, got, 4, "every body arrived before the cut")
	require.Nil(t, meta)
	failed := cmp.Or(err, metaErr)
	require.True(t, imapx.IsTransient(failed), "%v", failed)
	t.Logf("bodies' failure: %v; metadata's failure: %v", err, metaErr)
	for _, u := range uids[:4] {
		require.NotContains(t, b.serverFlags("INBOX", u), `\Seen`)
	}
}
