package imapx_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
)

// TestSecurityModes opens a session in every mode Dovecot offers and checks
// on the wire and in Dovecot's log whether the login went over TLS.
func TestSecurityModes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		sec      imapx.ConnectionSecurity
		starttls bool // STARTTLS on the wire
		tls      bool // Dovecot logs the login as TLS
	}{
		{imapx.TLSOnConnect, false, true},
		{imapx.StartTLSRequired, true, true},
		{imapx.StartTLSWhenAvailable, true, true},
		{imapx.Auto, true, true}, // not port 993: STARTTLS when available
		{imapx.None, false, false},
	} {
		t.Run(string(tc.sec), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			var rec recorder
			ep := b.endpoint(tc.sec)
			ep.Dial = rec.Dial("")
			s := b.open(ep, imapx.SessionOptions{})
			st, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			require.NotZero(t, st.UIDValidity)

			wire := rec.String()
			require.Equal(t, tc.starttls, strings.Contains(wire, "STARTTLS\r\n"), "STARTTLS on the wire")
			// The credential never crosses in plaintext when TLS is used.
			require.Equal(t, !tc.tls, strings.Contains(wire, "AUTHENTICATE PLAIN"), "plaintext AUTHENTICATE")
			if tc.sec == imapx.TLSOnConnect {
				require.Equal(t, byte(0x16), wire[0], "the first byte is a TLS handshake record")
			}
			line := b.srv.WaitLog("Login: user=<"+b.user.Name()+">, method=PLAIN", dovecot.LogWait)
			require.Equal(t, tc.tls, strings.Contains(line, ", TLS,"), "Dovecot's login line: %s", line)
		})
	}
	// Auto on port 993 means implicit TLS. Dial routes "port 993" to the
	// implicit-TLS listener.
	t.Run("Auto on port 993", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		var rec recorder
		ep := b.endpoint(imapx.Auto)
		ep.Port = 993
		ep.Dial = rec.Dial(b.srv.TLSAddr())
		s := b.open(ep, imapx.SessionOptions{})
		_, err := s.Examine(b.ctx, "INBOX")
		require.NoError(t, err)
		require.Equal(t, byte(0x16), rec.String()[0], "the first byte is a TLS handshake record")
	})
}

// TestSecurityWithoutSTARTTLS uses a plain listener that offers no STARTTLS
// and that Dovecot does not count as secured.
func TestSecurityWithoutSTARTTLS(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t, dovecot.WithoutSTARTTLS())

	t.Run("StartTlsRequired", func(t *testing.T) {
		b := setup(t, srv)
		var rec recorder
		ep := b.endpoint(imapx.StartTLSRequired)
		ep.Dial = rec.Dial("")
		_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
		require.ErrorIs(t, err, imapx.ErrStartTLSUnavailable)
		require.False(t, imapx.IsTransient(err))
		require.NotContains(t, rec.String(), "AUTHENTICATE", "no credential may be sent")
		require.Zero(t, b.passwordCalls.get(), "the password is not even resolved")
	})
	t.Run("StartTlsWhenAvailable", func(t *testing.T) {
		// Continues unencrypted, where Dovecot refuses plaintext logins.
		b := setup(t, srv)
		_, err := imapx.OpenReadSession(b.ctx, b.endpoint(imapx.StartTLSWhenAvailable), imapx.SessionOptions{})
		require.ErrorIs(t, err, imapx.ErrLoginDisabled)
		require.False(t, imapx.IsTransient(err))
	})
	t.Run("None", func(t *testing.T) {
		b := setup(t, srv)
		_, err := imapx.OpenReadSession(b.ctx, b.endpoint(imapx.None), imapx.SessionOptions{})
		require.ErrorIs(t, err, imapx.ErrLoginDisabled)
	})
	t.Run("TlsOnConnect", func(t *testing.T) {
		b := setup(t, srv)
		s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
		_, err := s.Examine(b.ctx, "INBOX")
		require.NoError(t, err)
	})
}

// TestSecurityWithoutSTARTTLSPlaintextAllowed: with plaintext logins allowed,
// StartTlsWhenAvailable and None log in unencrypted.
func TestSecurityWithoutSTARTTLSPlaintextAllowed(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t, dovecot.WithoutSTARTTLS(), dovecot.WithPlaintextAuth())
	for _, sec := range []imapx.ConnectionSecurity{imapx.StartTLSWhenAvailable, imapx.Auto, imapx.None} {
		t.Run(string(sec), func(t *testing.T) {
			b := setup(t, srv)
			var rec recorder
			ep := b.endpoint(sec)
			ep.Dial = rec.Dial("")
			s := b.open(ep, imapx.SessionOptions{})
			_, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			require.Contains(t, rec.String(), "AUTHENTICATE PLAIN")
			require.NotContains(t, rec.String(), "STARTTLS")
		})
	}
}

// TestTLSVerification: certificates are always verified, against the system
// roots by default, for the configured host name.
func TestTLSVerification(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for name, mutate := range map[string]func(ep *imapx.Endpoint){
		"system roots":         func(ep *imapx.Endpoint) { ep.TLSConfig = nil },
		"wrong server name":    func(ep *imapx.Endpoint) { ep.TLSConfig.ServerName = "mail.example.invalid" },
		"insecure skip verify": func(ep *imapx.Endpoint) { ep.TLSConfig.InsecureSkipVerify = true },
		"STARTTLS, system roots": func(ep *imapx.Endpoint) {
			ep.TLSConfig = nil
			ep.Security = imapx.StartTLSRequired
			ep.Port = b.srv.Port()
		},
	} {
		t.Run(name, func(t *testing.T) {
			ep := b.endpoint(imapx.TLSOnConnect)
			mutate(&ep)
			_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
			var tlsErr *imapx.TLSError
			require.ErrorAs(t, err, &tlsErr)
			require.False(t, imapx.IsTransient(err))
			t.Log(err)
		})
	}
	require.Zero(t, b.passwordCalls.get(), "no password is resolved for a connection that failed before authentication")
}

// TestWrongPassword: a rejected credential is a terminal
// *AuthenticationError that names neither the user nor the password.
func TestWrongPassword(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ep := b.endpoint(imapx.TLSOnConnect)
	ep.Password = func(context.Context) ([]byte, error) { return []byte("not-the-password-x9"), nil }
	_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
	var authErr *imapx.AuthenticationError
	require.ErrorAs(t, err, &authErr)
	require.Equal(t, "PLAIN", authErr.Mechanism)
	require.Equal(t, "AUTHENTICATIONFAILED", authErr.Code)
	require.False(t, imapx.IsTransient(err))
	requireNoPersonalData(t, err, b.user.Name(), "not-the-password-x9")
}

// TestPasswordResolvedPerConnectionAndWiped: the password is resolved for
// every connection and the slice handed over is zeroed after use.
func TestPasswordResolvedPerConnectionAndWiped(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	ep := b.endpoint(imapx.TLSOnConnect)
	var handed [][]byte
	ep.Password = func(context.Context) ([]byte, error) {
		p := []byte(b.user.Password())
		handed = append(handed, p)
		return p, nil
	}
	s := b.open(ep, imapx.SessionOptions{})
	_, err := s.Recover(b.ctx)
	require.NoError(t, err)
	require.Len(t, handed, 2, "one resolution per connection")
	for _, p := range handed {
		require.Equal(t, make([]byte, len(p)), p, "the password was not wiped")
	}
}

// TestExamine compares EXAMINE's answer with what the server holds.
func TestExamine(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for i := range 3 {
		b.user.Append("INBOX", message(i, 500), time.Time{})
	}
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	st, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	require.Equal(t, imapx.FolderState{
		Path:          "INBOX",
		UIDValidity:   b.user.UIDValidity("INBOX"),
		UIDNext:       uint32(b.user.UIDNext("INBOX")),
		Exists:        3,
		HighestModSeq: b.user.HighestModSeq("INBOX"),
	}, st)
	require.NotZero(t, st.HighestModSeq)

	// A folder that does not exist: terminal, and no folder is open after.
	_, err = s.Examine(b.ctx, "Zeta Secret Project")
	var cmdErr *imapx.CommandError
	require.ErrorAs(t, err, &cmdErr)
	require.Equal(t, "EXAMINE", cmdErr.Command)
	require.Equal(t, "NO", cmdErr.Status)
	require.False(t, imapx.IsTransient(err))
	requireNoPersonalData(t, err, "Zeta", "Secret")
	_, err = s.SearchUIDs(b.ctx, 0, time.Time{})
	require.ErrorIs(t, err, imapx.ErrNoFolder)

	// The connection is still usable.
	_, err = s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
}

// TestSearchUIDs covers the UID lower bound, the n:* quirk and SINCE.
func TestSearchUIDs(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	day := func(d int) time.Time { return time.Date(2024, time.January, d, 12, 0, 0, 0, time.UTC) }
	var uids []uint32
	for i := range 5 {
		uids = append(uids, uint32(b.user.Append("INBOX", message(i, 300), day(i+1))))
	}
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	for _, tc := range []struct {
		name  string
		after uint32
		since time.Time
		want  []uint32
	}{
		{"all", 0, time.Time{}, uids},
		{"after", uids[2], time.Time{}, uids[3:]},
		{"after the highest (n:* quirk)", uids[4], time.Time{}, nil},
		{"far above", uids[4] + 1000, time.Time{}, nil},
		{"since", 0, time.Date(2024, time.January, 3, 0, 0, 0, 0, time.UTC), uids[2:]},
		{"after and since", uids[3], time.Date(2024, time.January, 2, 0, 0, 0, 0, time.UTC), uids[4:]},
		{"since later than all", 0, time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC), nil},
	} {
		got, err := s.SearchUIDs(b.ctx, tc.after, tc.since)
		require.NoError(t, err, tc.name)
		require.Equal(t, tc.want, nonNil(got, tc.want), tc.name)
	}
}

func nonNil(got, want []uint32) []uint32 {
	if len(got) == 0 && want == nil {
		return nil
	}
	return got
}

// TestFetchMetadata checks the envelope fields, flags and a UID that was
// expunged before the fetch.
func TestFetchMetadata(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	internal := time.Date(2025, time.June, 1, 8, 30, 0, 0, time.UTC)
	raw1 := []byte("From: a@example.test\r\nSubject: =?ISO-8859-2?Q?=AElu=BBou=E8k=FD_k=F9=F2?=\r\n" +
		"Message-ID: <id-1@example.test>\r\nDate: Tue, 03 Mar 2026 09:15:00 +0200\r\n\r\nbody\r\n")
	raw2 := []byte("From: b@example.test\r\nSubject: plain\r\n\r\nno message-id, no date\r\n")
	raw3 := message(3, 100)
	uid1 := uint32(b.user.Append("INBOX", raw1, internal, "\\Flagged", "$Forwarded"))
	uid2 := uint32(b.user.Append("INBOX", raw2, internal))
	uid3 := uint32(b.user.Append("INBOX", raw3, internal))

	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	b.user.Expunge("INBOX", imap.UID(uid3))

	got, err := s.FetchMetadata(b.ctx, []uint32{uid1, uid2, uid3})
	require.NoError(t, err)
	require.Len(t, got, 2, "the expunged UID is absent")
	require.ElementsMatch(t, []string{"\\Flagged", "$Forwarded"}, got[0].Flags)
	got[0].Flags = nil
	require.Equal(t, imapx.MessageMetadata{
		UID: uid1, Size: int64(len(raw1)), InternalDate: internal,
		Subject: "Žluťoučký kůň", MessageID: "id-1@example.test",
		SentAt: time.Date(2026, time.March, 3, 7, 15, 0, 0, time.UTC),
	}, got[0])
	require.Equal(t, imapx.MessageMetadata{
		UID: uid2, Size: int64(len(raw2)), InternalDate: internal, Flags: []string{}, Subject: "plain",
	}, got[1])
	b.requireUnseen("INBOX", uid1, uid2)
}

// TestDebugLogCarriesNoPersonalData runs the operations with a debug logger
// and checks the log names no folder, subject or user.
func TestDebugLogCarriesNoPersonalData(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const folder = "Zeta Secret Project"
	b.user.CreateFolder(folder)
	uid := uint32(b.user.Append(folder, []byte("Subject: Quarterly Confidential Numbers\r\n\r\nbody\r\n"), time.Time{}))
	var log bytes.Buffer
	logger := slog.New(slog.NewJSONHandler(&log, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{Logger: logger})
	_, err := s.ListFolders(b.ctx)
	require.NoError(t, err)
	_, err = s.Examine(b.ctx, folder)
	require.NoError(t, err)
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.NoError(t, err)
	md, err := s.FetchMetadata(b.ctx, []uint32{uid})
	require.NoError(t, err)
	require.Equal(t, "Quarterly Confidential Numbers", md[0].Subject)
	require.NoError(t, s.FetchBodies(b.ctx, []uint32{uid}, 1<<20, func(imapx.Body) error { return nil }))
	_, err = s.Reconcile(b.ctx, []uint32{uid}, 0)
	require.NoError(t, err)
	_, err = s.Recover(b.ctx)
	require.NoError(t, err)
	require.NoError(t, s.Close())

	text := log.String()
	require.Contains(t, text, `"msg":"imap fetch bodies"`)
	require.Contains(t, text, `"msg":"imap reconcile"`)
	for _, w := range []string{"Zeta", "Secret", "Quarterly", "Confidential", b.user.Name(), b.user.Password()} {
		require.NotContains(t, text, w)
	}
	t.Log(text)
}
