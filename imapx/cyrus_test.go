package imapx_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// The tests in this file run the adapter against Cyrus IMAP 3.6, a second
// real server beside Dovecot: its own modification sequences, VANISHED
// answers, IDLE reports (from idled) and SASL library, and where it
// differs from Dovecot in what the adapter must take, SCRAM mechanisms
// advertised with their channel-bound -PLUS twins over TLS and special-use
// attributes in lower case.

// cyrusBundle is one test's Cyrus user and the context its calls run in.
type cyrusBundle struct {
	t    testing.TB
	ctx  context.Context
	srv  *cyrus.Server
	user *cyrus.User
}

// setupCyrus returns a bundle for a new user of srv, the shared Cyrus when
// nil.
func setupCyrus(t testing.TB, srv *cyrus.Server) *cyrusBundle {
	t.Helper()
	if srv == nil {
		srv = cyrus.Shared(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &cyrusBundle{t: t, ctx: ctx, srv: srv, user: srv.NewUser()}
}

// endpoint returns the user's endpoint in mode sec: the implicit-TLS
// listener for TLSOnConnect, the plain one otherwise.
func (b *cyrusBundle) endpoint(sec imapx.ConnectionSecurity) imapx.Endpoint {
	addr := b.srv.Addr()
	if sec == imapx.TLSOnConnect {
		addr = b.srv.TLSAddr()
	}
	host, portText, err := net.SplitHostPort(addr)
	require.NoError(b.t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(b.t, err)
	password := b.user.Password()
	return imapx.Endpoint{
		AccountID: "test-account",
		Host:      host,
		Port:      port,
		Security:  sec,
		TLSConfig: b.srv.TLSConfig(),
		Username:  b.user.Name(),
		Password:  func(context.Context) ([]byte, error) { return []byte(password), nil },
		// The plain-listener tests record the wire, which the policy only
		// allows with this opt-in.
		AllowInsecureConnection:       true,
		AllowClearTextOverUnencrypted: true,
	}
}

func (b *cyrusBundle) open(ep imapx.Endpoint) *imapx.ReadSession {
	b.t.Helper()
	s, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = s.Close() })
	return s
}

func (b *cyrusBundle) serverFlags(folder string, uid uint32) string {
	fs := b.user.Flags(folder, imap.UID(uid))
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return flagsOf(out)
}

// TestCyrusReconcileEveryPathSameEndState is the reconciliation scenario of
// TestReconcileEveryPathSameEndState on Cyrus, by QRESYNC (its default)
// and by CONDSTORE (QRESYNC suppressed): the first pass describes the
// window, a second one after flag changes and expunges by another client
// describes only the changed messages and finds the expunged ones gone,
// a third one on a quiet folder transfers no flags, and the local copy
// ends as the server's folder.
func TestCyrusReconcileEveryPathSameEndState(t *testing.T) {
	t.Parallel()
	for mode, opts := range map[imapx.ReconcileMode][]cyrus.Option{
		imapx.QResync:   nil,
		imapx.CondStore: {cyrus.WithoutCapabilities("QRESYNC")},
	} {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			var srv *cyrus.Server
			if opts != nil {
				srv = cyrus.Start(t, opts...)
			}
			b := setupCyrus(t, srv)
			var uids []uint32
			for i := range 12 {
				var flags []imap.Flag
				if i%3 == 0 {
					flags = append(flags, imap.FlagAnswered)
				}
				uids = append(uids, uint32(b.user.Append("INBOX", message(i, 300), time.Time{}, flags...)))
			}
			var log wireLog
			ep := b.endpoint(imapx.None)
			ep.Dial = log.dial("")
			// QRESYNC is enabled only on a reconciliation session's own
			// connection; a read session asks in CondStore mode at most.
			s := b.open(ep)
			if mode == imapx.QResync {
				var err error
				s, err = imapx.OpenReconcileSession(b.ctx, ep, imapx.SessionOptions{})
				require.NoError(t, err)
				t.Cleanup(func() { _ = s.Close() })
			}
			require.Equal(t, mode, s.ReconcileMode(), "chosen from the advertised capabilities")
			st, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			require.NotZero(t, st.HighestModSeq)

			first, err := s.Reconcile(b.ctx, uids, 0)
			require.NoError(t, err)
			require.Equal(t, mode, first.Mode)
			require.Equal(t, uids, first.Present)
			require.Len(t, first.Changed, len(uids))
			local := localCopy{}
			local.apply(t, uids, first)
			for _, uid := range uids {
				require.Equal(t, b.serverFlags("INBOX", uid), local[uid])
			}
			require.Equal(t, b.user.HighestModSeq("INBOX"), first.HighestModSeq)

			b.user.SetFlags("INBOX", imap.UID(uids[1]), []imap.Flag{imap.FlagFlagged}, nil)
			b.user.SetFlags("INBOX", imap.UID(uids[3]), nil, []imap.Flag{imap.FlagAnswered})
			b.user.SetFlags("INBOX", imap.UID(uids[4]), []imap.Flag{imap.FlagDeleted}, nil) // a flag, not a deletion
			b.user.SetFlags("INBOX", imap.UID(uids[5]), []imap.Flag{"$Label1"}, nil)
			b.user.Expunge("INBOX", imap.UID(uids[6]), imap.UID(uids[7]), imap.UID(uids[8]))
			b.user.Expunge("INBOX", imap.UID(uids[10]))

			second, err := s.Reconcile(b.ctx, uids, first.HighestModSeq)
			require.NoError(t, err)
			require.True(t, second.Narrowed)
			local.apply(t, uids, second)
			var changed []uint32
			for _, c := range second.Changed {
				changed = append(changed, c.UID)
			}
			require.Equal(t, []uint32{uids[1], uids[3], uids[4], uids[5]}, changed, "only the changed messages are described")
			require.Equal(t, []uint32{uids[6], uids[7], uids[8], uids[10]}, second.Vanished)
			require.Greater(t, second.HighestModSeq, first.HighestModSeq)

			quiet, err := s.Reconcile(b.ctx, second.Present, second.HighestModSeq)
			require.NoError(t, err)
			require.Equal(t, second.Present, quiet.Present)
			require.Empty(t, quiet.Vanished)
			require.Empty(t, quiet.Changed, "a narrowed question on a quiet folder transfers no flags")

			server := localCopy{}
			for _, uid := range toUint32(b.user.UIDs("INBOX")) {
				server[uid] = b.serverFlags("INBOX", uid)
			}
			require.Equal(t, server, local)
			for _, uid := range second.Present {
				require.NotContains(t, b.user.Flags("INBOX", imap.UID(uid)), imap.FlagSeen)
			}
			require.NoError(t, s.Close())
			cmds := requireReconciliationWire(t, log.reconciliation(t))
			if mode == imapx.QResync {
				require.True(t, contains(cmds, "VANISHED)"), "%v", cmds)
				require.Contains(t, strings.Join(log.reconciliation(t).lines(true), "\n"), "* VANISHED (EARLIER) ",
					"Cyrus answers CHANGEDSINCE ... VANISHED with VANISHED (EARLIER)")
			} else {
				require.False(t, contains(cmds, "VANISHED"))
			}
		})
	}
}

// TestCyrusWatchOneFolderWithIdle: Cyrus offers no NOTIFY, so a watching
// session watches one folder with IDLE. Its idled reports a delivery, a
// flag change and an expunge by another client within moments, each
// ending the wait with the folder's name, and a quiet renewal keeps the
// connection.
func TestCyrusWatchOneFolderWithIdle(t *testing.T) {
	t.Parallel()
	b := setupCyrus(t, nil)
	rec := &recorder{}
	ep := b.endpoint(imapx.None)
	ep.Dial = rec.Dial("")
	s, err := imapx.OpenWatchSession(b.ctx, ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.False(t, s.CanSubscribe(), "no NOTIFY")
	require.True(t, s.CanIdle())

	uid := b.user.Append("INBOX", message(1, 100), time.Time{})
	_, err = s.WatchFolder(b.ctx, "INBOX")
	require.NoError(t, err)
	changed, err := s.Wait(b.ctx, time.Second)
	require.NoError(t, err)
	require.Empty(t, changed, "a quiet renewal")

	wait := func(name string, change func()) {
		t.Helper()
		done := make(chan []string, 1)
		errs := make(chan error, 1)
		before := rec.Continuations()
		go func() {
			changed, err := s.Wait(b.ctx, 10*time.Second)
			errs <- err
			done <- changed
		}()
		poll.UntilTrue(t, 10*time.Second, name+": the server answered IDLE with its continuation", func() bool {
			return rec.Continuations() > before
		})
		start := time.Now()
		change()
		require.NoError(t, <-errs, name)
		require.Equal(t, []string{"INBOX"}, <-done, name)
		require.Less(t, time.Since(start), 5*time.Second, "%s: the report, not the renewal, ended the wait", name)
	}
	wait("delivery", func() { b.user.Append("INBOX", message(2, 100), time.Time{}) })
	wait("flag change", func() { b.user.SetFlags("INBOX", uid, []imap.Flag{imap.FlagFlagged}, nil) })
	wait("expunge", func() { b.user.Expunge("INBOX", uid) })
	require.True(t, s.Usable())
	require.NoError(t, s.Close())
	require.Equal(t, []string{"EXAMINE", "IDLE", "DONE", "IDLE", "DONE", "IDLE", "DONE", "IDLE", "DONE", "LOGOUT"}, requireWatchOnly(t, rec))
}

// TestCyrusCompressedFetchIsFaithful: Cyrus offers COMPRESS=DEFLATE; the
// content connection negotiates it after authentication, receives fewer
// bytes than without it, and every body arrives byte for byte as the
// server serves it, without \Seen.
func TestCyrusCompressedFetchIsFaithful(t *testing.T) {
	t.Parallel()
	b := setupCyrus(t, nil)
	want := map[uint32][]byte{}
	var uids []uint32
	for i, size := range []int{300, 4_000, 90_000, 400_000, 12_000} {
		raw := message(i, size)
		uid := uint32(b.user.Append("INBOX", raw, time.Time{}))
		uids = append(uids, uid)
		want[uid] = raw
	}
	p := faultproxy.Start(t, b.srv.Addr())
	downstream := func(compress bool) (int64, *recorder) {
		var rec recorder
		ep := b.endpoint(imapx.None)
		ep.Dial = rec.Dial(p.Addr())
		ep.Compression = imapx.CompressionOff
		if compress {
			ep.Compression = imapx.CompressionOn
		}
		before := p.Stats().ServerToClient
		s := b.open(ep)
		require.Equal(t, compress, s.Compression().InUse)
		_, err := s.Examine(b.ctx, "INBOX")
		require.NoError(t, err)
		var got []imapx.Body
		require.NoError(t, s.FetchBodies(b.ctx, uids, 1<<20, collect(&got)))
		require.Len(t, got, len(uids))
		for _, body := range got {
			require.True(t, bytes.Equal(want[body.UID], body.Raw), "UID %d differs", body.UID)
		}
		require.NoError(t, s.Close())
		return p.Stats().ServerToClient - before, &rec
	}
	compressed, rec := downstream(true)
	names := requireReadOnlyWire(t, rec)
	require.Less(t, slices.Index(names, "AUTHENTICATE"), slices.Index(names, "COMPRESS"), "COMPRESS after authentication")
	require.Contains(t, names[slices.Index(names, "COMPRESS")+1:], "UID FETCH", "sent after COMPRESS and recorded inflated")
	plain, _ := downstream(false)
	t.Logf("server to client: %d bytes compressed, %d plain", compressed, plain)
	require.Less(t, compressed, plain/3, "the messages are repetitive text")
	for _, uid := range uids {
		require.NotContains(t, b.user.Flags("INBOX", imap.UID(uid)), imap.FlagSeen)
	}
}

// TestCyrusAuthenticatesWithEachMechanism: every mechanism Cyrus's SASL
// library offers here and MailFathom implements logs in, chosen as the
// only one permitted: on the plain listener, where the wire shows which
// one was used, and over TLS, where Cyrus also advertises the
// channel-bound SCRAM-*-PLUS variants, which MailFathom does not
// implement, so its SCRAM must announce no channel binding support the
// server would take for a downgrade (RFC 5802 §6).
func TestCyrusAuthenticatesWithEachMechanism(t *testing.T) {
	t.Parallel()
	srv := cyrus.Shared(t)
	for _, mech := range []sasl.Mechanism{sasl.Plain, sasl.Login, sasl.CramMD5, sasl.ScramSHA1, sasl.ScramSHA256} {
		t.Run(string(mech), func(t *testing.T) {
			t.Parallel()
			b := setupCyrus(t, srv)
			var rec recorder
			ep := b.endpoint(imapx.None)
			ep.Dial = rec.Dial("")
			ep.PermittedMechanisms = []sasl.Mechanism{mech}
			require.NoError(t, b.open(ep).Close())
			if mech == sasl.Login && !strings.Contains(rec.String(), "AUTHENTICATE LOGIN") {
				require.Contains(t, rec.String(), " LOGIN ", "the LOGIN command")
			} else {
				require.Contains(t, rec.String(), "AUTHENTICATE "+string(mech))
			}

			ep = b.endpoint(imapx.TLSOnConnect)
			ep.PermittedMechanisms = []sasl.Mechanism{mech}
			require.NoError(t, b.open(ep).Close())
		})
	}
	// What the TLS listener advertises before login.
	conn, err := tls.Dial("tcp", srv.TLSAddr(), srv.TLSConfig())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	greeting, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	for _, m := range []string{"SCRAM-SHA-1", "SCRAM-SHA-256"} {
		require.Contains(t, greeting, " AUTH="+m+"-PLUS ")
		require.Contains(t, greeting, " AUTH="+m+" ")
	}
}

// TestCyrusListFolders: the listing finds the inbox and the special-use
// folders Cyrus creates with a user's INBOX, with their attributes, which
// Cyrus writes in lower case (`\archive`) and the listing reports in
// IMAP's spelling, so that an alias bound by special use resolves on
// Cyrus as on Dovecot. Cyrus's namespaces for other users and shared
// folders add nothing for a user who was given none, and the parent that
// creating Projects/2026 makes is a folder of its own, not the \Noselect
// placeholder Dovecot lists.
func TestCyrusListFolders(t *testing.T) {
	t.Parallel()
	b := setupCyrus(t, nil)
	b.user.CreateFolder("Projects/2026")
	s := b.open(b.endpoint(imapx.TLSOnConnect))
	folders, err := s.ListFolders(b.ctx)
	require.NoError(t, err)
	got := byPath(folders)
	require.Len(t, got, len(folders), "no duplicates")
	require.Contains(t, got, "INBOX")
	for name, attr := range cyrus.SpecialUseFolders {
		require.Contains(t, got, name)
		require.Contains(t, got[name].Attributes, attr, name)
	}
	require.Equal(t, "/", got["Projects/2026"].Delimiter)
	require.Len(t, folders, 1+len(cyrus.SpecialUseFolders)+2, "INBOX, the special-use folders, Projects and Projects/2026: %v", folders)
}

// TestCyrusFetchIdentities: Cyrus offers OBJECTID, so a session fetches
// EMAILID and THREADID; a message another client copied to a second folder
// answers there with the EMAILID it has in the first, and the fetch sets
// no flag.
func TestCyrusFetchIdentities(t *testing.T) {
	t.Parallel()
	b := setupCyrus(t, nil)
	b.user.CreateFolder("Filed")
	first := b.user.Append("INBOX", message(1, 300), time.Time{})
	second := b.user.Append("INBOX", message(2, 300), time.Time{})
	c := b.user.Dial()
	_, err := c.Select("INBOX", nil).Wait()
	require.NoError(t, err)
	copied, err := c.Copy(imap.UIDSetNum(first), "Filed").Wait()
	require.NoError(t, err)
	dest, _ := copied.DestUIDs.Nums()

	s := b.open(b.endpoint(imapx.None))
	require.Equal(t, imapx.ObjectIdentity, s.IdentityScheme())
	_, err = s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	inbox, err := s.FetchIdentities(b.ctx, []uint32{uint32(first), uint32(second)})
	require.NoError(t, err)
	require.Len(t, inbox, 2)
	require.NotEqual(t, inbox[uint32(first)].EmailID, inbox[uint32(second)].EmailID)
	require.NotEmpty(t, inbox[uint32(first)].ThreadID)
	require.Nil(t, inbox[uint32(first)].Labels, "OBJECTID carries no labels")

	_, err = s.Examine(b.ctx, "Filed")
	require.NoError(t, err)
	filed, err := s.FetchIdentities(b.ctx, []uint32{uint32(dest[0])})
	require.NoError(t, err)
	require.Equal(t, inbox[uint32(first)], filed[uint32(dest[0])], "a copy keeps its EMAILID")
	require.Empty(t, b.user.Flags("INBOX", first))
}

// TestCyrusFetchIdentitiesOnTheSessionsOwnConnection: identities are asked
// over the session's own connection, between go-imap's commands, plain,
// compressed and over TLS: metadata, identities and content interleave
// on one login, and each answer is whole.
func TestCyrusFetchIdentitiesOnTheSessionsOwnConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		security    imapx.ConnectionSecurity
		compression imapx.CompressionPolicy
	}{
		{"plain", imapx.None, imapx.CompressionOff},
		{"compressed", imapx.None, imapx.CompressionOn},
		{"tls", imapx.TLSOnConnect, imapx.CompressionOff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setupCyrus(t, nil)
			var raws [][]byte
			var uids []uint32
			for i := range 4 {
				raws = append(raws, message(i, 40_000))
				uids = append(uids, uint32(b.user.Append("INBOX", raws[i], time.Time{})))
			}
			ep := b.endpoint(tc.security)
			ep.Compression = tc.compression
			s, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
			require.NoError(t, err)
			require.Equal(t, tc.compression == imapx.CompressionOn, s.Compression().InUse)
			_, err = s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			for round := range 3 {
				meta, err := s.FetchMetadata(b.ctx, uids)
				require.NoError(t, err)
				require.Len(t, meta, len(uids))
				ids, err := s.FetchIdentities(b.ctx, uids)
				require.NoError(t, err)
				require.Len(t, ids, len(uids), "round %d", round)
				var got [][]byte
				require.NoError(t, s.FetchBodies(b.ctx, uids, 1<<20, func(body imapx.Body) error {
					got = append(got, bytes.Clone(body.Raw))
					return nil
				}))
				require.Equal(t, raws, got, "round %d", round)
				again, err := s.FetchIdentities(b.ctx, uids[:1])
				require.NoError(t, err)
				require.Equal(t, ids[uids[0]], again[uids[0]])
			}
			require.NoError(t, s.Close())
			require.Len(t, b.user.Sessions(), 1, "one login for content and identities")
		})
	}
}
