package sasl_test

// Integration tests against a real Dovecot 2.3 (internal/testharness/dovecot).
//
// XOAUTH2 and OAUTHBEARER run against Dovecot's oauth2 passdb
// (dovecot.WithOAuth2), which introspects every token at a fake
// authorization server (internal/testharness/oauthtest). Their wire format
// is unit-tested in bearer_test.go.

import (
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/oauthtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// logWait bounds the wait for a connection state or a Dovecot log line.
const logWait = dovecot.LogWait

// dialTLS connects to s's implicit-TLS listener the way imapx does: its own
// TLS stream, wrapped in sasl.FixEmptyResponses, handed to imapclient.New.
// The client is closed at the test's end.
func dialTLS(t *testing.T, s *dovecot.Server) *imapclient.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second}
	conn, err := tls.DialWithDialer(d, "tcp", s.TLSAddr(), s.TLSConfig())
	require.NoError(t, err)
	return newClient(t, conn)
}

// dialPlainFrom connects to s's plain listener from local address laddr,
// without STARTTLS. From 127.0.0.2 Dovecot does not count the connection
// as secured and advertises LOGINDISABLED.
func dialPlainFrom(t *testing.T, s *dovecot.Server, laddr string) *imapclient.Client {
	t.Helper()
	d := &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.ParseIP(laddr)}}
	conn, err := d.Dial("tcp", s.Addr())
	require.NoError(t, err)
	return newClient(t, conn)
}

func newClient(t *testing.T, conn net.Conn) *imapclient.Client {
	t.Helper()
	c := imapclient.New(sasl.FixEmptyResponses(conn), nil)
	t.Cleanup(func() { _ = c.Close() })
	require.NoError(t, c.WaitGreeting())
	return c
}

func authenticate(t *testing.T, c *imapclient.Client, m sasl.Mechanism, user, password string) error {
	t.Helper()
	cl, err := sasl.NewClient(m, sasl.Credentials{Username: user, Password: []byte(password)})
	require.NoError(t, err)
	return sasl.Authenticate(c, cl)
}

var passwordMechanisms = []sasl.Mechanism{
	sasl.ScramSHA1, sasl.ScramSHA256, sasl.CramMD5, sasl.Plain, sasl.Login,
}

func TestDovecotAuthenticatesWithEachMechanism(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []dovecot.Option
	}{
		{"with SASL-IR", nil},
		// Without SASL-IR imapclient sends the initial response after the
		// server's empty continuation, and Dovecot prompts LOGIN's user
		// name.
		{"without SASL-IR", []dovecot.Option{dovecot.WithCapability("IMAP4rev1 IDLE")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			opts := append([]dovecot.Option{dovecot.WithAuthMechanisms("plain", "login", "cram-md5", "scram-sha-1", "scram-sha-256")}, tc.opts...)
			s := dovecot.Start(t, opts...)
			u := s.NewUser()
			for _, m := range passwordMechanisms {
				c := dialTLS(t, s)
				require.Equal(t, tc.opts == nil, c.Caps().Has(imap.CapSASLIR))
				require.NoError(t, authenticate(t, c, m, u.Name(), u.Password()), m)
				// imapclient signals the command's end before it updates
				// its state, so the state may lag a moment.
				poll.Until(t, logWait, fmt.Sprintf("%s: the connection is authenticated", m), func() (bool, string) {
					return c.State() == imap.ConnStateAuthenticated, fmt.Sprintf("state %v", c.State())
				})
				line := s.WaitLog("user=<"+u.Name()+">, method="+string(m)+",", logWait)
				require.Contains(t, line, "Login:")
				// The session works.
				_, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
				require.NoError(t, err, m)
			}
		})
	}
}

func TestDovecotRefusesAWrongPassword(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "login", "cram-md5", "scram-sha-1", "scram-sha-256"))
	u := s.NewUser()
	const wrong = "not-the-password-42"
	for _, m := range passwordMechanisms {
		c := dialTLS(t, s)
		err := authenticate(t, c, m, u.Name(), wrong)
		require.Error(t, err, m)
		var imapErr *imap.Error
		require.True(t, errors.As(err, &imapErr), "%s: the server's NO, not a client refusal: %v", m, err)
		require.Equal(t, imap.StatusResponseTypeNo, imapErr.Type, m)
		require.NotContains(t, err.Error(), wrong)
		require.NotContains(t, err.Error(), u.Password())
		require.Equal(t, imap.ConnStateNotAuthenticated, c.State(), m)
	}
	require.NotContains(t, s.Log(), "method=", "no login succeeded")
}

func TestDovecotChoosesSCRAMOverPLAIN(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "scram-sha-256"))
	u := s.NewUser()
	c := dialTLS(t, s)
	advertised := c.Caps().AuthMechanisms()
	require.ElementsMatch(t, []string{"PLAIN", "SCRAM-SHA-256"}, advertised)

	// PLAIN first in the configured order; SCRAM wins all the same.
	choice, err := sasl.Choose(mechs{sasl.Plain, sasl.ScramSHA256}, advertised,
		c.Caps().Has(imap.CapLoginDisabled), false, false, true, false)
	require.NoError(t, err)
	require.Equal(t, sasl.Choice{Mechanism: sasl.ScramSHA256}, choice)
	require.NoError(t, authenticate(t, c, choice.Mechanism, u.Name(), u.Password()))
	s.WaitLog("user=<"+u.Name()+">, method=SCRAM-SHA-256,", logWait)
	require.NotContains(t, s.Log(), "method=PLAIN")
}

func TestDovecotOnlyCRAMPermittedEndsUnavailable(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "scram-sha-256"))
	u := s.NewUser()
	c := dialTLS(t, s)
	caps := c.Caps()

	passwordReads := 0
	password := func() []byte { passwordReads++; return []byte(u.Password()) }

	n := sasl.NewNegotiator(sasl.Situation{
		Permitted:     mechs{sasl.CramMD5},
		Advertised:    caps.AuthMechanisms(),
		LoginDisabled: caps.Has(imap.CapLoginDisabled),
		Encrypted:     true,
	})
	choice, err := n.Next()
	if err == nil {
		_ = authenticate(t, c, choice.Mechanism, u.Name(), string(password()))
	}
	require.ErrorIs(t, err, sasl.ErrMechanismUnavailable)
	require.Contains(t, err.Error(), "MailAuthenticationMechanismUnavailable")
	require.NotContains(t, err.Error(), u.Name())
	require.Zero(t, passwordReads, "no password resolved, so none sent")
	require.Equal(t, imap.ConnStateNotAuthenticated, c.State())
	// Nothing reached Dovecot's authentication: no login, no failure.
	require.NoError(t, c.Noop().Wait())
	require.NotContains(t, s.Log(), u.Name())
}

func TestDovecotLoginDisabledOverPlaintext(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "login", "scram-sha-256"))
	u := s.NewUser()

	// From another loopback address the plain listener is not secured in
	// Dovecot's sense: LOGINDISABLED, no PLAIN or LOGIN, SCRAM still offered.
	c := dialPlainFrom(t, s, "127.0.0.2")
	caps := c.Caps()
	require.True(t, caps.Has(imap.CapLoginDisabled))
	require.NotContains(t, caps.AuthMechanisms(), "PLAIN")

	situation := sasl.Situation{
		Permitted:                     mechs{sasl.Plain, sasl.Login},
		Advertised:                    caps.AuthMechanisms(),
		LoginDisabled:                 true,
		CanStayUnencrypted:            true, // None
		AllowClearTextOverUnencrypted: true,
		Encrypted:                     false,
	}
	_, err := situation.Choose()
	require.ErrorIs(t, err, sasl.ErrMechanismUnavailable)
	require.Contains(t, err.Error(), "LOGINDISABLED")

	// With SCRAM permitted too it authenticates over the unencrypted
	// connection, the password never on the wire.
	situation.Permitted = append(situation.Permitted, sasl.ScramSHA256)
	choice, err := situation.Choose()
	require.NoError(t, err)
	require.Equal(t, sasl.ScramSHA256, choice.Mechanism)
	require.NoError(t, authenticate(t, c, choice.Mechanism, u.Name(), u.Password()))
	line := s.WaitLog("user=<"+u.Name()+">, method=SCRAM-SHA-256,", logWait)
	require.False(t, strings.Contains(line, "TLS"), "the connection was not encrypted: %s", line)
}

// TestGoIMAPSendsEmptyContinuationAsEquals pins the go-imap bug
// EmptyResponseConn works around (emersion/go-imap#760): with imapclient's
// own DialTLS, SCRAM's last, empty response goes out as "=" and Dovecot
// refuses it. When this test fails, go-imap is fixed: remove
// EmptyResponseConn and this test.
func TestGoIMAPSendsEmptyContinuationAsEquals(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "scram-sha-256"))
	u := s.NewUser()
	c, err := imapclient.DialTLS(s.TLSAddr(), &imapclient.Options{
		Dialer:    &net.Dialer{Timeout: 10 * time.Second},
		TLSConfig: s.TLSConfig(),
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close() })
	err = authenticate(t, c, sasl.ScramSHA256, u.Name(), u.Password())
	var imapErr *imap.Error
	require.True(t, errors.As(err, &imapErr), "go-imap now sends empty continuations correctly: remove EmptyResponseConn (%v)", err)
	require.Equal(t, imap.StatusResponseTypeBad, imapErr.Type)
	s.WaitLog("Invalid base64 data in continued response", logWait)

	// PLAIN has no empty continuation and works without the wrapper.
	c2, err := imapclient.DialTLS(s.TLSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c2.Close() })
	require.NoError(t, authenticate(t, c2, sasl.Plain, u.Name(), u.Password()))
}

var tokenMechanisms = []sasl.Mechanism{sasl.OAuthBearer, sasl.XOAuth2}

func authenticateWithToken(t *testing.T, c *imapclient.Client, m sasl.Mechanism, user, token string, port int) error {
	t.Helper()
	cl, err := sasl.NewClient(m, sasl.Credentials{Username: user, Token: []byte(token), Host: dovecot.Host, Port: port})
	require.NoError(t, err)
	return sasl.Authenticate(c, cl)
}

func TestDovecotAcceptsABearerToken(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		opts []dovecot.Option
	}{
		{"with SASL-IR", nil},
		{"without SASL-IR", []dovecot.Option{dovecot.WithCapability("IMAP4rev1 IDLE")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			as := oauthtest.Start(t)
			s := dovecot.Start(t, append([]dovecot.Option{dovecot.WithOAuth2(as.IntrospectionURL())}, tc.opts...)...)
			u := s.NewUser()
			for _, m := range tokenMechanisms {
				c := dialTLS(t, s)
				require.Contains(t, c.Caps().AuthMechanisms(), string(m))
				token := as.Issue(u.Name())
				require.NoError(t, authenticateWithToken(t, c, m, u.Name(), token, s.TLSPort()), m)
				poll.Until(t, logWait, fmt.Sprintf("%s: the connection is authenticated", m), func() (bool, string) {
					return c.State() == imap.ConnStateAuthenticated, fmt.Sprintf("state %v", c.State())
				})
				s.WaitLog("user=<"+u.Name()+">, method="+string(m)+",", logWait)
				_, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
				require.NoError(t, err, m)
			}
			require.Len(t, as.Introspections(), 2)
		})
	}
}

// TestDovecotRefusesABearerToken checks the error path RFC 7628 §3.2.3
// prescribes against a real server: the client answers the error challenge
// and the refusal is a *BearerTokenError wrapping the server's NO, carrying
// neither the token nor the user name.
func TestDovecotRefusesABearerToken(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	s := dovecot.Start(t, dovecot.WithOAuth2(as.IntrospectionURL()))
	u := s.NewUser()
	for _, m := range tokenMechanisms {
		token := as.Issue(u.Name())
		as.Revoke(token)
		c := dialTLS(t, s)
		err := authenticateWithToken(t, c, m, u.Name(), token, s.TLSPort())
		var be *sasl.BearerTokenError
		require.ErrorAs(t, err, &be, m)
		require.Equal(t, string(m), be.Mechanism)
		require.NotEmpty(t, be.Status, "Dovecot's challenge carries a status")
		var imapErr *imap.Error
		require.ErrorAs(t, err, &imapErr, "%s: the server's NO is wrapped", m)
		require.Equal(t, imap.StatusResponseTypeNo, imapErr.Type)
		require.Equal(t, imap.ResponseCodeAuthenticationFailed, imapErr.Code)
		require.NotContains(t, err.Error(), token)
		require.NotContains(t, err.Error(), u.Name())
		// The exchange ended cleanly: the connection is usable.
		require.NoError(t, c.Noop().Wait(), m)
		require.Equal(t, imap.ConnStateNotAuthenticated, c.State())
	}
	require.NotContains(t, s.Log(), "method=", "no login succeeded")
}
