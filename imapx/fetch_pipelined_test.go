package imapx_test

import (
	"bytes"
	"cmp"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
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

// TestFetchBodiesThenMetadataAsksAgainForAFlagsOnlyAnswer: while the
// bodies are read, the server reports a next-batch message's new flags
// alone, unsolicited. go-imap hands that FETCH to the metadata command,
// whose real answer for the UID then goes elsewhere; the UID is asked for
// once more in a FETCH of its own and comes back with its metadata.
// Dovecot cannot be made to send such a FETCH on cue, so a scripted server
// plays it.
func TestFetchBodiesThenMetadataAsksAgainForAFlagsOnlyAnswer(t *testing.T) {
	t.Parallel()
	const envelope = `INTERNALDATE "02-Mar-2026 10:00:00 +0000" RFC822.SIZE 24 ENVELOPE (NIL "hello" NIL NIL NIL NIL NIL NIL NIL NIL)`
	var mu sync.Mutex
	var fetches []string
	bodiesTag := ""
	srv := imapscript.Start(t, throttleScript("", "", func(c *imapscript.Conn, tag, name string) (bool, bool) {
		if name != "UID FETCH" {
			return false, true
		}
		mu.Lock()
		fetches = append(fetches, tag)
		n := len(fetches)
		mu.Unlock()
		switch n {
		case 1: // the bodies: answered with the metadata's command
			bodiesTag = tag
		case 2: // the metadata of 2 and 3, a flags-only FETCH of 2 first
			c.Send("* 1 FETCH (UID 1 BODY[] {"+strconv.Itoa(len(scriptedBody))+"}\r\n"+scriptedBody+")",
				`* 2 FETCH (UID 2 FLAGS (\Flagged))`,
				`* 2 FETCH (UID 2 FLAGS (\Flagged) `+envelope+`)`,
				`* 3 FETCH (UID 3 FLAGS () `+envelope+`)`,
				bodiesTag+" OK done", tag+" OK done")
		default: // 2 asked for again
			c.Send(`* 2 FETCH (UID 2 FLAGS (\Flagged) `+envelope+`)`, tag+" OK done")
		}
		return true, true
	}))
	var meta []imapx.MessageMetadata
	var metaErr error
	var got []imapx.Body
	require.NoError(t, throttleRun(t, srv, true, func(s *imapx.ReadSession) error {
		var err error
		meta, metaErr, err = s.FetchBodiesThenMetadata(t.Context(), []uint32{1}, 1<<20, collect(&got), []uint32{2, 3})
		return err
	}))
	require.NoError(t, metaErr)
	require.Len(t, got, 1)
	require.Equal(t, scriptedBody, string(got[0].Raw))
	byUID := map[uint32]imapx.MessageMetadata{}
	for _, m := range meta {
		byUID[m.UID] = m
	}
	require.Len(t, meta, 2, "%+v", meta)
	require.EqualValues(t, 24, byUID[2].Size, "UID 2 carries its metadata, not only its flags")
	require.Equal(t, "hello", byUID[2].Subject)
	require.Equal(t, []string{`\Flagged`}, byUID[2].Flags)
	require.EqualValues(t, 24, byUID[3].Size)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, fetches, 3, "the UID whose answer was its flags alone was asked for again")
}
