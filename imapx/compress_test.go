package imapx_test

import (
	"bytes"
	"context"
	"encoding/base64"
	"math/rand/v2"
	"net"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
)

// fetchAll runs what the forward pass runs on a folder, SearchUIDs,
// FetchMetadata and FetchBodies, and returns the bodies.
func fetchAll(t *testing.T, b *testBundle, s *imapx.ReadSession, maxBytes int64) []imapx.Body {
	t.Helper()
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	uids, err := s.SearchUIDs(b.ctx, 0, timeZero)
	require.NoError(t, err)
	md, err := s.FetchMetadata(b.ctx, uids)
	require.NoError(t, err)
	require.Len(t, md, len(uids))
	var got []imapx.Body
	require.NoError(t, s.FetchBodies(b.ctx, uids, maxBytes, collect(&got)))
	return got
}

// TestCompressedFetchIsFaithful: with Compression on, the main connection
// negotiates COMPRESS=DEFLATE after authentication, sends its commands
// deflated (the recorder inflates them: still only BODY.PEEK), receives
// fewer bytes than without it, and stores every message byte for byte,
// without setting \Seen.
func TestCompressedFetchIsFaithful(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, want := b.seed("INBOX", []int{300, 4_000, 90_000, 400_000, 12_000})
	p := faultproxy.Start(t, b.srv.Addr())

	downstream := func(compress bool) (int64, *recorder) {
		var rec recorder
		ep := b.endpoint(imapx.None) // plaintext, so the recorder reads commands
		ep.Dial = rec.Dial(p.Addr())
		ep.Compression = imapx.CompressionOff
		if compress {
			ep.Compression = imapx.CompressionOn
		}
		before := p.Stats().ServerToClient
		s := b.open(ep, imapx.SessionOptions{})
		require.Equal(t, compress, s.Compression().InUse)
		got := fetchAll(t, b, s, 256<<10)
		require.Len(t, got, len(uids))
		for i, body := range got {
			require.Equal(t, uids[i], body.UID)
			if len(want[body.UID]) > 256<<10 {
				require.True(t, body.Exceeded)
				continue
			}
			require.True(t, bytes.Equal(want[body.UID], body.Raw), "UID %d differs", body.UID)
		}
		require.NoError(t, s.Close())
		return p.Stats().ServerToClient - before, &rec
	}

	compressed, rec := downstream(true)
	names := requireReadOnlyWire(t, rec)
	require.Contains(t, names, "COMPRESS")
	after := names[slices.Index(names, "COMPRESS")+1:]
	for _, want := range []string{"EXAMINE", "UID SEARCH", "UID FETCH", "LOGOUT"} {
		require.Contains(t, after, want, "sent after COMPRESS and recorded inflated")
	}
	require.Contains(t, rec.String(), "BODY.PEEK[]")
	require.Less(t, slices.Index(names, "AUTHENTICATE"), slices.Index(names, "COMPRESS"), "COMPRESS after authentication")

	plain, rec := downstream(false)
	require.NotContains(t, requireReadOnlyWire(t, rec), "COMPRESS")
	t.Logf("server to client: %d bytes compressed, %d plain", compressed, plain)
	require.Less(t, compressed, plain/3, "the messages are repetitive text")
	b.requireUnseen("INBOX", uids...)
}

// TestCompressedOverTLS: compression inside implicit TLS, the way
// production runs it, survives a cut mid-fetch like an uncompressed
// connection does: a transient *TransportError, then Recover compresses
// the new connection and the rest arrives intact.
func TestCompressedOverTLS(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// Random bodies, base64 like attachments: they deflate to about three
	// quarters, so the cut below lands a few messages in.
	rng := rand.New(rand.NewPCG(1, 2))
	msgs := make([]dovecot.SeedMessage, 60)
	for i := range msgs {
		noise := make([]byte, 15_000)
		for j := range noise {
			noise[j] = byte(rng.UintN(256))
		}
		msgs[i].Raw = append(message(i, 100), base64.StdEncoding.EncodeToString(noise)...)
	}
	uids := toUint32(b.user.SeedMaildir("INBOX", msgs))
	want := map[uint32][]byte{}
	for i, uid := range uids {
		want[uid] = msgs[i].Raw
	}
	p := faultproxy.Start(t, b.srv.TLSAddr())
	ep := b.endpoint(imapx.TLSOnConnect)
	ep.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, network, p.Addr())
	}
	ep.Compression = imapx.CompressionOn
	s := b.open(ep, imapx.SessionOptions{})
	require.True(t, s.Compression().InUse)
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 100_000)
	var got []imapx.Body
	err = s.FetchBodies(b.ctx, uids, 1<<20, collect(&got))
	require.Error(t, err)
	require.True(t, imapx.IsTransient(err), "%v", err)
	var trErr *imapx.TransportError
	require.ErrorAs(t, err, &trErr)
	require.NotEmpty(t, got)
	require.Less(t, len(got), len(uids))

	_, err = s.Recover(b.ctx)
	require.NoError(t, err)
	require.True(t, s.Compression().InUse)
	rest, err := s.SearchUIDs(b.ctx, got[len(got)-1].UID, timeZero)
	require.NoError(t, err)
	require.NoError(t, s.FetchBodies(b.ctx, rest, 1<<20, collect(&got)))
	require.Len(t, got, len(uids))
	for i, body := range got {
		require.Equal(t, uids[i], body.UID)
		require.True(t, bytes.Equal(want[body.UID], body.Raw))
	}
	b.requireUnseen("INBOX", uids...)
}

// TestCompressionNotOffered: a server that does not advertise
// COMPRESS=DEFLATE is not asked, and the session works uncompressed.
func TestCompressionNotOffered(t *testing.T) {
	t.Parallel()
	b := setup(t, dovecot.Start(t, dovecot.WithoutCompression()))
	uids, want := b.seed("INBOX", []int{500, 5_000})
	var rec recorder
	ep := b.endpoint(imapx.None)
	ep.Dial = rec.Dial("")
	ep.Compression = imapx.CompressionOn
	s := b.open(ep, imapx.SessionOptions{})
	require.False(t, s.Capabilities().Has("COMPRESS=DEFLATE"))
	require.Equal(t, imapx.Compression{Reason: imapx.CompressionReasonNotOffered}, s.Compression())
	got := fetchAll(t, b, s, 1<<20)
	require.Len(t, got, len(uids))
	for _, body := range got {
		require.Equal(t, want[body.UID], body.Raw)
	}
	require.NoError(t, s.Close())
	require.NotContains(t, strings.ToUpper(rec.String()), "COMPRESS")
	requireReadOnlyWire(t, &rec)
}

// TestCompressionRefused: a server that advertises COMPRESS=DEFLATE but
// answers the command with NO (RFC 4978 §3 allows it, for instance when
// compression is already active or the server is loaded) leaves the
// session uncompressed and usable: the next command goes out in plain
// IMAP and its answer is read as such. Dovecot never refuses, so a
// scripted server plays the refusal.
func TestCompressionRefused(t *testing.T) {
	t.Parallel()
	const caps = "IMAP4rev1 SASL-IR AUTH=PLAIN COMPRESS=DEFLATE"
	var asked atomic.Int32
	srv := imapscript.Start(t, func(c *imapscript.Conn) {
		c.Greet(caps)
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		c.Send(tag + " OK [CAPABILITY " + caps + "] logged in")
		c.ServeWith(caps, map[string]func(string){
			"COMPRESS": func(tag string) {
				asked.Add(1)
				c.Send(tag + " NO not now")
			},
			"EXAMINE": func(tag string) {
				c.Send("* 0 EXISTS", "* OK [UIDVALIDITY 7] ok", "* OK [UIDNEXT 1] ok", "* FLAGS (\\Seen)", tag+" OK [READ-ONLY] done")
			},
		})
	})
	ep := scriptedEndpoint(srv, sasl.Plain)
	ep.AllowClearTextOverUnencrypted = true
	ep.Compression = imapx.CompressionOn
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
	require.NoError(t, err)
	require.EqualValues(t, 1, asked.Load(), "COMPRESS is asked once, where it is advertised")
	require.Equal(t, imapx.Compression{Reason: imapx.CompressionReasonRefused}, s.Compression())
	st, err := s.Examine(ctx, "INBOX")
	require.NoError(t, err, "the session stays usable uncompressed")
	require.EqualValues(t, 7, st.UIDValidity)
	require.NoError(t, s.Close())
}

// TestCompressionAuto: with CompressionAuto, a server the connection
// reaches on the loopback is not asked for COMPRESS (nothing on the wire
// names it) and the session says why; the same server reached at what the
// connection reports as a public address is asked, and the session runs
// compressed. The public address is the test's: a connection that reports
// it while it runs over the loopback.
func TestCompressionAuto(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, want := b.seed("INBOX", []int{700, 30_000})
	for _, tc := range []struct {
		name   string
		remote net.Addr
		want   imapx.Compression
	}{
		{"loopback", nil, imapx.Compression{Reason: imapx.CompressionReasonLoopback}},
		{"public", &net.TCPAddr{IP: net.ParseIP("192.0.2.10"), Port: 993}, imapx.Compression{InUse: true, Reason: imapx.CompressionReasonPublicAddress}},
		{"private", &net.TCPAddr{IP: net.ParseIP("10.1.2.3"), Port: 993}, imapx.Compression{Reason: imapx.CompressionReasonPrivateNetwork}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var rec recorder
			ep := b.endpoint(imapx.None)
			dial := rec.Dial("")
			ep.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				c, err := dial(ctx, network, addr)
				if err != nil || tc.remote == nil {
					return c, err
				}
				return remoteAs{c, tc.remote}, nil
			}
			ep.Compression = imapx.CompressionAuto
			s := b.open(ep, imapx.SessionOptions{})
			require.Equal(t, tc.want, s.Compression())
			got := fetchAll(t, b, s, 1<<20)
			require.Len(t, got, len(uids))
			for _, body := range got {
				require.Equal(t, want[body.UID], body.Raw)
			}
			require.NoError(t, s.Close())
			if tc.want.InUse {
				require.Contains(t, requireReadOnlyWire(t, &rec), "COMPRESS")
			} else {
				require.NotContains(t, strings.ToUpper(rec.String()), "COMPRESS")
			}
		})
	}
}

// remoteAs is a connection that reports addr as the address it reached.
type remoteAs struct {
	net.Conn
	addr net.Addr
}

func (c remoteAs) RemoteAddr() net.Addr { return c.addr }
