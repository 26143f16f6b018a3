package imapx_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/oauthtest"
)

// tokenBundle is a testBundle whose user is a token account: its endpoint
// has no password, and Token issues a token from the bundle's
// authorization server, counting the calls.
type tokenBundle struct {
	*testBundle
	as           *oauthtest.Server
	tokenCalls   *countingInt
	refusedCalls *countingInt
	rec          *recorder
}

// setupToken starts an authorization server and a Dovecot whose oauth2
// passdb introspects at it, with opts on top.
func setupToken(t *testing.T, opts ...dovecot.Option) *tokenBundle {
	t.Helper()
	as := oauthtest.Start(t)
	srv := dovecot.Start(t, append([]dovecot.Option{dovecot.WithOAuth2(as.IntrospectionURL())}, opts...)...)
	return newTokenBundle(t, as, srv)
}

func newTokenBundle(t *testing.T, as *oauthtest.Server, srv *dovecot.Server) *tokenBundle {
	t.Helper()
	return &tokenBundle{testBundle: setup(t, srv), as: as, tokenCalls: &countingInt{}, refusedCalls: &countingInt{}, rec: &recorder{}}
}

// tokenEndpoint returns the endpoint in mode sec of a token account
// permitting permitted, whose Token returns issue(). Its bytes are
// recorded in b.rec, readable in mode None (Dovecot counts a plain
// connection from 127.0.0.1 as secured, so it accepts a token there).
func (b *tokenBundle) tokenEndpoint(sec imapx.ConnectionSecurity, issue func() string, permitted ...sasl.Mechanism) imapx.Endpoint {
	ep := b.endpoint(sec)
	ep.Password = nil
	ep.PermittedMechanisms = permitted
	ep.Token = func(context.Context) ([]byte, error) {
		b.tokenCalls.inc()
		return []byte(issue()), nil
	}
	ep.TokenRefused = b.refusedCalls.inc
	ep.Dial = b.rec.Dial("")
	// Mode None is for reading the wire here, and needs the opt-in.
	ep.AllowInsecureConnection = sec == imapx.None
	return ep
}

func (b *tokenBundle) validToken() string { return b.as.Issue(b.user.Name()) }

// requireLogin waits for Dovecot's login line with mechanism and checks
// the token was obtained once and introspected once.
func (b *tokenBundle) requireLogin(mechanism string) {
	b.t.Helper()
	b.srv.WaitLog(fmt.Sprintf("user=<%s>, method=%s,", b.user.Name(), mechanism), dovecot.LogWait)
	require.Equal(b.t, 1, b.tokenCalls.get())
	require.Len(b.t, b.as.Introspections(), 1)
	require.Zero(b.t, b.refusedCalls.get())
}

func TestTokenAccountPrefersOAuthBearer(t *testing.T) {
	t.Parallel()
	b := setupToken(t)
	// The configured order is presentation only.
	s := b.open(b.tokenEndpoint(imapx.None, b.validToken, sasl.XOAuth2, sasl.OAuthBearer), imapx.SessionOptions{})
	_, err := s.ListFolders(b.ctx)
	require.NoError(t, err)
	b.requireLogin("OAUTHBEARER")
	require.Contains(t, b.rec.String(), "AUTHENTICATE OAUTHBEARER")
}

func TestTokenAccountWithXOAuth2Alone(t *testing.T) {
	t.Parallel()
	t.Run("PermittedAlone", func(t *testing.T) {
		t.Parallel()
		b := setupToken(t)
		b.open(b.tokenEndpoint(imapx.TLSOnConnect, b.validToken, sasl.XOAuth2), imapx.SessionOptions{})
		b.requireLogin("XOAUTH2")
	})
	t.Run("OfferedAlone", func(t *testing.T) {
		t.Parallel()
		b := setupToken(t, dovecot.WithAuthMechanisms("plain", "xoauth2"))
		b.open(b.tokenEndpoint(imapx.TLSOnConnect, b.validToken, sasl.OAuthBearer, sasl.XOAuth2), imapx.SessionOptions{})
		b.requireLogin("XOAUTH2")
	})
}

func TestTokenAccountWithOAuthBearerAlone(t *testing.T) {
	t.Parallel()
	b := setupToken(t, dovecot.WithAuthMechanisms("plain", "oauthbearer"))
	b.open(b.tokenEndpoint(imapx.TLSOnConnect, b.validToken, sasl.OAuthBearer), imapx.SessionOptions{})
	b.requireLogin("OAUTHBEARER")
}

// TestTokenAccountWithoutItsMechanism checks that a token account needs a
// token mechanism the server offers: it requests no token, reads no
// password and never falls back to the LOGIN command, even when the
// allow-list would permit one for a password account.
func TestTokenAccountWithoutItsMechanism(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		offered   []string // nil: no token mechanism and no oauth2 passdb
		permitted []sasl.Mechanism
	}{
		{"server offers no token mechanism", nil, []sasl.Mechanism{sasl.OAuthBearer, sasl.XOAuth2}},
		{"server offers only the one not permitted", []string{"plain", "xoauth2"}, []sasl.Mechanism{sasl.OAuthBearer}},
		{"clear-text mechanisms permitted too", nil, []sasl.Mechanism{sasl.OAuthBearer, sasl.Plain, sasl.Login}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var b *tokenBundle
			if tc.offered == nil {
				b = newTokenBundle(t, oauthtest.Start(t), dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "login", "scram-sha-256")))
			} else {
				b = setupToken(t, dovecot.WithAuthMechanisms(tc.offered...))
			}
			ep := b.tokenEndpoint(imapx.None, b.validToken, tc.permitted...)
			ep.AllowClearTextOverUnencrypted = true
			_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
			require.ErrorIs(t, err, sasl.ErrMechanismUnavailable)
			require.False(t, imapx.IsTransient(err))
			require.Zero(t, b.tokenCalls.get(), "no token is requested for a mechanism that is not there")
			require.Zero(t, b.passwordCalls.get())
			require.NotContains(t, b.rec.String(), "AUTHENTICATE")
			require.NotContains(t, strings.ToUpper(b.rec.String()), " LOGIN ")
		})
	}
}

func TestRefusedTokenIsAnAuthenticationError(t *testing.T) {
	t.Parallel()
	for _, mech := range []sasl.Mechanism{sasl.OAuthBearer, sasl.XOAuth2} {
		t.Run(string(mech), func(t *testing.T) {
			t.Parallel()
			b := setupToken(t)
			revoked := b.validToken()
			b.as.Revoke(revoked)
			_, err := imapx.OpenReadSession(b.ctx, b.tokenEndpoint(imapx.TLSOnConnect, func() string { return revoked }, mech), imapx.SessionOptions{})
			var authErr *imapx.AuthenticationError
			require.ErrorAs(t, err, &authErr)
			require.Equal(t, string(mech), authErr.Mechanism)
			require.Equal(t, "AUTHENTICATIONFAILED", authErr.Code)
			require.False(t, imapx.IsTransient(err))
			require.Equal(t, 1, b.tokenCalls.get())
			require.Equal(t, 1, b.refusedCalls.get(), "the source is told its token was refused")
			require.NotContains(t, err.Error(), revoked)
			require.NotContains(t, err.Error(), b.user.Name())
		})
	}
}

func TestTokenSourceFailureIsTerminal(t *testing.T) {
	t.Parallel()
	b := setupToken(t)
	// A network failure of the token source was the source's own pipeline
	// to retry: here it must not read as a transient mailbox failure.
	cause := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	ep := b.tokenEndpoint(imapx.None, b.validToken, sasl.OAuthBearer)
	ep.Token = func(context.Context) ([]byte, error) {
		b.tokenCalls.inc()
		return nil, fmt.Errorf("token endpoint unreachable: %w", cause)
	}
	_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
	var tokErr *imapx.TokenError
	require.ErrorAs(t, err, &tokErr)
	require.ErrorIs(t, err, syscall.ECONNREFUSED, "the cause stays reachable")
	require.False(t, imapx.IsTransient(err))
	require.Equal(t, 1, b.tokenCalls.get())
	require.NotContains(t, b.rec.String(), "AUTHENTICATE", "nothing reached the mail server")
	require.Empty(t, b.as.Introspections())

	// The caller's own cancellation stays a context error.
	ctx, cancel := context.WithCancel(b.ctx)
	ep.Token = func(ctx context.Context) ([]byte, error) {
		cancel()
		return nil, ctx.Err()
	}
	_, err = imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, errors.As(err, &tokErr))
}

func TestTokenAccountTakesNoPassword(t *testing.T) {
	t.Parallel()
	b := setupToken(t)
	ep := b.tokenEndpoint(imapx.TLSOnConnect, b.validToken, sasl.OAuthBearer)
	ep.Password = b.endpoint(imapx.TLSOnConnect).Password
	_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
	require.ErrorContains(t, err, "both a password and a token source")
	require.Zero(t, b.tokenCalls.get())
	require.Zero(t, b.passwordCalls.get())
}

// TestPasswordAccountNeverUsesATokenMechanism: a password account whose
// allow-list names a token mechanism beside a password one authenticates
// with the password mechanism and requests no token.
func TestPasswordAccountNeverUsesATokenMechanism(t *testing.T) {
	t.Parallel()
	b := setupToken(t, dovecot.WithAuthMechanisms("scram-sha-256", "oauthbearer", "xoauth2"))
	ep := b.endpoint(imapx.TLSOnConnect)
	ep.PermittedMechanisms = []sasl.Mechanism{sasl.OAuthBearer, sasl.ScramSHA256}
	b.open(ep, imapx.SessionOptions{})
	b.srv.WaitLog("user=<"+b.user.Name()+">, method=SCRAM-SHA-256", dovecot.LogWait)
	require.Empty(t, b.as.Introspections())
}
