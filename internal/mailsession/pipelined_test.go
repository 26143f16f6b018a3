package mailsession_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
)

// TestPipelinedFetchRecoversAfterACutInTheMetadata cuts the connection
// after a batch's last body, while the following batch's metadata, asked
// for in the same flight, arrives. Dovecot completes the bodies' command
// only after the metadata's answers, so the cut fails the bodies'
// command: the pipeline's next attempt asks for no body again, only for
// the metadata, on a recovered connection.
func TestPipelinedFetchRecoversAfterACutInTheMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	uids, raws := b.seed(4, 50_000)
	next, _ := b.seed(400, 500)
	p := faultproxy.Start(t, b.srv.Addr())
	s := b.open(t, "acct", b.endpoint(t, p.Addr()))
	cutInTheMetadata(t, b.ctx, s, p, b.rec, uids, next, raws)
	b.requireUnseen(t, append(uids, next...))
}

// cutInTheMetadata examines INBOX, fetches uids' bodies (four of 50 KB)
// with next's metadata (400 small messages) in the same flight through a
// proxy that cuts the connection once the bodies have passed, and checks
// that every body arrived once, byte-identical, the metadata is complete,
// the session recovered once, and the bodies were asked for once and the
// metadata twice, with nothing but read-only commands.
func cutInTheMetadata(t *testing.T, ctx context.Context, s *mailsession.Session, p *faultproxy.Proxy, rec *wiretap.Recorder, uids, next []uint32, raws map[uint32][]byte) {
	t.Helper()
	_, err := s.Examine(ctx, "INBOX")
	require.NoError(t, err)
	// The four bodies are 200 KB; 400 envelopes are well over 20 KB.
	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 220_000)
	seen := map[uint32]int{}
	meta, metaErr, err := s.FetchBodiesThenMetadata(ctx, uids, 1<<20, func(body imapx.Body) error {
		seen[body.UID]++
		require.True(t, bytes.Equal(raws[body.UID], body.Raw), "UID %d", body.UID)
		return nil
	}, next)
	require.NoError(t, err)
	require.NoError(t, metaErr)
	require.EqualValues(t, 1, p.Stats().Cut, "the proxy cut the connection")
	require.Len(t, seen, len(uids))
	for _, u := range uids {
		require.Equal(t, 1, seen[u], "UID %d delivered once", u)
	}
	require.Len(t, meta, len(next))
	for i, m := range meta {
		require.Equal(t, next[i], m.UID)
	}
	require.Equal(t, 1, s.Recoveries())
	wiretap.RequireReadOnly(t, rec)
	require.Equal(t, 1, strings.Count(rec.String(), "BODY.PEEK[]"), "the bodies were asked for once")
	require.Equal(t, 2, strings.Count(rec.String(), "ENVELOPE"), "the metadata was asked for again, alone")
}

// TestPipelinedFetchAsksForTheMetadataAloneAfterItsOwnFailure: Cyrus
// completes the bodies' command before it answers the metadata's, so a
// cut while the metadata arrives fails the metadata alone. The bodies
// stand, and the metadata is asked for once more on its own, on a
// recovered connection.
func TestPipelinedFetchAsksForTheMetadataAloneAfterItsOwnFailure(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	srv := cyrus.Shared(t)
	u := srv.NewUser()
	var uids, next []uint32
	raws := map[uint32][]byte{}
	for i := range 404 {
		size := 500
		if i < 4 {
			size = 50_000
		}
		raw := message(i, size)
		uid := uint32(u.Append("INBOX", raw, time.Time{}))
		raws[uid] = raw
		if i < 4 {
			uids = append(uids, uid)
		} else {
			next = append(next, uid)
		}
	}
	p := faultproxy.Start(t, srv.Addr())
	host, portText, err := net.SplitHostPort(p.Addr())
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	rec := &wiretap.Recorder{}
	password := u.Password()
	ep := imapx.Endpoint{
		AccountID: "acct", Host: host, Port: port, Security: imapx.None, Username: u.Name(),
		Password:                func(context.Context) ([]byte, error) { return []byte(password), nil },
		AllowInsecureConnection: true, AllowClearTextOverUnencrypted: true,
		Dial: rec.Dial(""),
	}
	logs := &capture.Buffer{}
	reg, err := outbound.NewRegistry(fastBudgets(), logs.Logger(), nil)
	require.NoError(t, err)
	s, err := mailsession.Open(ctx, reg, "acct", "inbox", ep, opener)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	cutInTheMetadata(t, ctx, s, p, rec, uids, next, raws)
	// The bodies are what a careless FETCH would mark \Seen.
	for _, uid := range uids {
		require.NotContains(t, u.Flags("INBOX", imap.UID(uid)), imap.FlagSeen, "UID %d got \\Seen", uid)
	}
}
