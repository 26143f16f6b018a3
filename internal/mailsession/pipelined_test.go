package mailsession_test

import (
	"bytes"
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
)

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
	_, err = s.Examine(ctx, "INBOX")
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
	for _, uid := range uids {
		require.Equal(t, 1, seen[uid], "UID %d delivered once", uid)
	}
	require.Len(t, meta, len(next))
	require.Equal(t, 1, s.Recoveries())
	wiretap.RequireReadOnly(t, rec)
	require.Equal(t, 1, strings.Count(rec.String(), "BODY.PEEK[]"), "the bodies were asked for once")
	require.Equal(t, 2, strings.Count(rec.String(), "ENVELOPE"), "the metadata was asked for again, alone")
}
