package imapx_test

import (
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
)

// TestAuthenticationFollowsTheAllowList checks the narrowing end to end:
// the strongest permitted mechanism the server offers is used whatever the
// configured order, and an allow-list the server cannot satisfy ends before
// any password is read.
func TestAuthenticationFollowsTheAllowList(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "login", "scram-sha-1", "scram-sha-256"))

	t.Run("ScramOverPlainWhateverTheOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, srv)
		ep := b.endpoint(imapx.TLSOnConnect)
		ep.PermittedMechanisms = []sasl.Mechanism{sasl.Plain, sasl.ScramSHA256}
		s := b.open(ep, imapx.SessionOptions{})
		require.NotNil(t, s)
		srv.WaitLog("user=<"+b.user.Name()+">, method=SCRAM-SHA-256", dovecot.LogWait)
	})

	t.Run("NoPermittedMechanismReadsNoPassword", func(t *testing.T) {
		t.Parallel()
		b := setup(t, srv)
		ep := b.endpoint(imapx.TLSOnConnect)
		ep.PermittedMechanisms = []sasl.Mechanism{sasl.CramMD5}
		_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
		require.ErrorIs(t, err, sasl.ErrMechanismUnavailable)
		require.Contains(t, err.Error(), "MailAuthenticationMechanismUnavailable")
		require.Zero(t, b.passwordCalls.get(), "the password is never resolved")
		require.False(t, imapx.IsTransient(err))
	})
}

// scriptedEndpoint returns an endpoint of a password account permitting
// mechanisms that reaches srv in plain text (the scripted server speaks no
// TLS; mode None needs its opt-in).
func scriptedEndpoint(srv *imapscript.Server, mechanisms ...sasl.Mechanism) imapx.Endpoint {
	return imapx.Endpoint{
		AccountID:               "scripted",
		Host:                    srv.Host(),
		Port:                    srv.Port(),
		Security:                imapx.None,
		Username:                "someone@example.test",
		Password:                func(context.Context) ([]byte, error) { return []byte("pencil-" + scriptedSecret), nil },
		PermittedMechanisms:     mechanisms,
		AllowInsecureConnection: true,
	}
}

const scriptedSecret = "s3cret-never-in-errors"

// TestAuthenticationRefusalsTheClientRaisesAreTerminal: when the mechanism
// itself ends the exchange — the server refused the credential inside the
// SASL exchange, or broke the mechanism's rules — the session fails with a
// terminal, named error after one connection; only a connection lost with
// nothing from the mechanism is transient.
//
// Dovecot cannot produce these cases (it answers a wrong SCRAM proof and an
// unknown user with a plain NO, never sends a malformed challenge or a weak
// iteration count, and always ends a refused token with NO), so a scripted
// server plays them; TestAuthenticationRefusalsAgainstDovecot covers what
// Dovecot does produce.
func TestAuthenticationRefusalsTheClientRaisesAreTerminal(t *testing.T) {
	t.Parallel()
	scram := []sasl.Mechanism{sasl.ScramSHA256}
	tests := []struct {
		name      string
		script    imapscript.Script
		token     sasl.Mechanism                // a token account with this mechanism
		tokenText string                        // its token, a fixed one when empty
		rejected  string                        // the *AuthenticationError's Code, or
		exchange  func(t *testing.T, err error) // checks the *AuthenticationExchangeError's cause
		transient bool
	}{
		{name: "SCRAM invalid-proof", script: imapscript.ScramServerFinal("e=invalid-proof"), rejected: "invalid-proof"},
		{name: "SCRAM unknown-user", script: imapscript.ScramServerFinal("e=unknown-user"), rejected: "unknown-user"},
		{name: "SCRAM error the RFC does not register", script: imapscript.ScramServerFinal("e=account " + scriptedSecret + " locked"), rejected: "other-error"},
		{
			name:   "SCRAM channel-binding complaint",
			script: imapscript.ScramServerFinal("e=server-does-support-channel-binding"),
			exchange: func(t *testing.T, err error) {
				var se *sasl.ScramServerError
				require.ErrorAs(t, err, &se)
				require.Equal(t, "server-does-support-channel-binding", se.Value)
			},
		},
		{
			name: "server nonce that does not extend the client's",
			script: imapscript.ScramServerFirst(func(string) string {
				return imapscript.ScramFirst("someone-elses-nonce", 4096)
			}, ""),
			exchange: func(t *testing.T, err error) { require.ErrorIs(t, err, sasl.ErrMalformedChallenge) },
		},
		{
			name:   "challenge that is not base64",
			script: imapscript.ScramServerFirst(func(string) string { return "this is not base64!" }, ""),
			exchange: func(t *testing.T, err error) {
				var corrupt base64.CorruptInputError
				require.ErrorAs(t, err, &corrupt)
			},
		},
		{
			name:   "iteration count below the minimum",
			script: imapscript.ScramServerFirst(func(n string) string { return imapscript.ScramFirst(n, 1) }, ""),
			exchange: func(t *testing.T, err error) {
				var ice *sasl.IterationCountError
				require.ErrorAs(t, err, &ice)
			},
		},
		{
			name:   "iteration count above the maximum",
			script: imapscript.ScramServerFirst(func(n string) string { return imapscript.ScramFirst(n, sasl.MaxIterations+1) }, ""),
			exchange: func(t *testing.T, err error) {
				var ice *sasl.IterationCountError
				require.ErrorAs(t, err, &ice)
			},
		},
		{name: "XOAUTH2 refusal, then the connection drops", script: imapscript.BearerRefusalThenDrop(), token: sasl.XOAuth2, rejected: ""},
		{name: "OAUTHBEARER refusal, then the connection drops", script: imapscript.BearerRefusalThenDrop(), token: sasl.OAuthBearer, rejected: ""},
		{
			name: "token the mechanism cannot carry", script: imapscript.BearerRefusalThenDrop(), token: sasl.XOAuth2, tokenText: "tok\x01en-" + scriptedSecret,
			exchange: func(t *testing.T, err error) { require.ErrorIs(t, err, sasl.ErrWrongCredential) },
		},
		{name: "connection dropped during AUTHENTICATE", script: imapscript.DropDuringAuthenticate(), transient: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := imapscript.Start(t, tt.script)
			ep := scriptedEndpoint(srv, scram...)
			refused := 0
			if tt.token != "" {
				ep.PermittedMechanisms = []sasl.Mechanism{tt.token}
				ep.Password = nil
				token := "token-" + scriptedSecret
				if tt.tokenText != "" {
					token = tt.tokenText
				}
				ep.Token = func(context.Context) ([]byte, error) { return []byte(token), nil }
				ep.TokenRefused = func() { refused++ }
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			_, err := imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
			require.Error(t, err)
			require.Equal(t, 1, srv.Connections())
			require.NotContains(t, err.Error(), scriptedSecret)
			require.NotContains(t, err.Error(), "someone")
			identity, _ := failure.Identity(err)

			if tt.transient {
				var trErr *imapx.TransportError
				require.ErrorAs(t, err, &trErr)
				require.True(t, imapx.IsTransient(err), "%v", err)
				require.Equal(t, "MailboxConnectionLost", identity)
				return
			}
			require.False(t, imapx.IsTransient(err), "%v", err)
			if tt.exchange != nil {
				var exchErr *imapx.AuthenticationExchangeError
				require.ErrorAs(t, err, &exchErr, "%v", err)
				if tt.token != "" {
					require.Equal(t, string(tt.token), exchErr.Mechanism)
				} else {
					require.Equal(t, "SCRAM-SHA-256", exchErr.Mechanism)
				}
				tt.exchange(t, err)
				require.Equal(t, imapx.AuthenticationExchangeIdentity, identity)
				require.Equal(t, "MailAuthenticationExchangeRefused", identity)
				return
			}
			var authErr *imapx.AuthenticationError
			require.ErrorAs(t, err, &authErr, "%v", err)
			require.Equal(t, tt.rejected, authErr.Code)
			require.Equal(t, "MailAuthenticationRejected", identity)
			if tt.token != "" {
				require.Equal(t, string(tt.token), authErr.Mechanism)
				require.Equal(t, 1, refused, "the token source is told its token was refused")
			}
		})
	}
}

// TestAuthenticationRefusalsAgainstDovecot: what Dovecot answers to a
// wrong SCRAM password and to a user it does not know is a NO, a rejected
// credential; a password or user name SASLprep refuses ends the exchange
// on the client's side, terminal and named, with the password never
// offered in a weaker form.
func TestAuthenticationRefusalsAgainstDovecot(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "scram-sha-256"))
	tests := []struct {
		name     string
		username string // the user's own when empty
		password string // the user's own when empty
		rejected bool
		cause    error
	}{
		{name: "wrong password", password: "not-the-password", rejected: true},
		{name: "unknown user", username: "nobody-here", rejected: true},
		{name: "password SASLprep refuses", password: "bell\u0007" + scriptedSecret, cause: sasl.ErrPasswordNotPreparable},
		{name: "user name SASLprep refuses", username: "bell\u0007user", cause: sasl.ErrUsernameNotPreparable},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv)
			rec := &recorder{}
			ep := b.endpoint(imapx.None)
			ep.Dial = rec.Dial("")
			ep.PermittedMechanisms = []sasl.Mechanism{sasl.ScramSHA256, sasl.Plain}
			if tt.username != "" {
				ep.Username = tt.username
			}
			if tt.password != "" {
				pw := tt.password
				ep.Password = func(context.Context) ([]byte, error) { return []byte(pw), nil }
			}
			_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
			require.Error(t, err)
			require.False(t, imapx.IsTransient(err), "%v", err)
			require.NotContains(t, err.Error(), scriptedSecret)
			require.NotContains(t, err.Error(), b.user.Name())
			identity, _ := failure.Identity(err)
			if tt.rejected {
				var authErr *imapx.AuthenticationError
				require.ErrorAs(t, err, &authErr)
				require.Equal(t, imapx.AuthenticationError{Mechanism: "SCRAM-SHA-256", Code: "AUTHENTICATIONFAILED"}, *authErr)
				require.Equal(t, "MailAuthenticationRejected", identity)
			} else {
				var exchErr *imapx.AuthenticationExchangeError
				require.ErrorAs(t, err, &exchErr)
				require.ErrorIs(t, err, tt.cause)
				require.Equal(t, "MailAuthenticationExchangeRefused", identity)
			}
			require.LessOrEqual(t, strings.Count(rec.String(), "AUTHENTICATE"), 1, "one attempt at most")
			require.NotContains(t, rec.String(), "PLAIN", "no weaker mechanism follows")
		})
	}
}

// TestScramSHA512IsPreferredWhenOffered: SCRAM-SHA-512 wins over the
// weaker mechanisms the allow-list also permits, whatever their order, and
// a wrong password with it is a rejected credential.
//
// Dovecot 2.3 does not offer SCRAM-SHA-512 (its auth process refuses the
// mechanism name), so a scripted server whose SCRAM side is written apart
// from internal/sasl, on crypto/pbkdf2, plays it.
func TestScramSHA512IsPreferredWhenOffered(t *testing.T) {
	t.Parallel()
	const user, password = "someone@example.test", "pencil-" + scriptedSecret
	permitted := []sasl.Mechanism{sasl.Plain, sasl.ScramSHA1, sasl.ScramSHA256, sasl.ScramSHA512}

	t.Run("Authenticates", func(t *testing.T) {
		t.Parallel()
		srv := imapscript.Start(t, imapscript.ScramServer(user, password))
		ep := scriptedEndpoint(srv, permitted...)
		ep.AllowClearTextOverUnencrypted = true
		s, err := imapx.OpenReadSession(context.Background(), ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		require.Equal(t, []string{"SCRAM-SHA-512"}, srv.Mechanisms())
	})

	t.Run("WrongPasswordIsRejected", func(t *testing.T) {
		t.Parallel()
		srv := imapscript.Start(t, imapscript.ScramServer(user, "another-password"))
		ep := scriptedEndpoint(srv, permitted...)
		ep.AllowClearTextOverUnencrypted = true
		_, err := imapx.OpenReadSession(context.Background(), ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
		var authErr *imapx.AuthenticationError
		require.ErrorAs(t, err, &authErr)
		require.Equal(t, imapx.AuthenticationError{Mechanism: "SCRAM-SHA-512", Code: "AUTHENTICATIONFAILED"}, *authErr)
		require.Equal(t, []string{"SCRAM-SHA-512"}, srv.Mechanisms(), "no weaker mechanism follows")
	})
}
