package imapx_test

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
)

// TestFetchBodiesThenMetadata: the following batch's metadata FETCH is on
// the wire before the bodies' tagged answer arrives, the bodies come
// byte-identical and in order, the metadata is what FetchMetadata returns,
// and nothing is marked \Seen.
func TestFetchBodiesThenMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, want := b.seed("INBOX", []int{300_000, 200_000, 250_000, 1_000, 2_000, 3_000, 4_000})
	batch, next := uids[:3], uids[3:]
	var log wireLog
	ep := b.endpoint(imapx.None)
	ep.Dial = log.dial("")
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

	log.mu.Lock()
	conn := log.conns[0]
	log.mu.Unlock()
	// sentBeforeBodiesAnswered is what the client had sent when the
	// answer to its last body FETCH arrived.
	sentBeforeBodiesAnswered := func() string {
		var tag string
		for _, l := range conn.lines(false) {
			if strings.Contains(l, "BODY.PEEK[]") {
				tag = strings.Fields(l)[0]
			}
		}
		require.NotEmpty(t, tag)
		sent := conn.sentWhenReceived(t, "\r\n"+tag+" OK")
		return sent[strings.LastIndex(sent, "BODY.PEEK[]"):]
	}
	require.Contains(t, sentBeforeBodiesAnswered(), "ENVELOPE", "the metadata FETCH was sent before the bodies were answered")
	// One after the other, the same check finds no metadata FETCH.
	require.NoError(t, s.FetchBodies(b.ctx, batch, 1<<20, collect(&got)))
	_, err = s.FetchMetadata(b.ctx, next)
	require.NoError(t, err)
	require.NotContains(t, sentBeforeBodiesAnswered(), "ENVELOPE")
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
