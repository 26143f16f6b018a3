package mailendpoint_test

// End-to-end tests of a token account: configuration as an operator writes
// it, the endpoint this package builds, the token source, the resilience
// pipelines and a real Dovecot whose oauth2 passdb introspects the tokens
// at a fake authorization server.

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/oauthtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// testBundle is one token account against its own Dovecot and
// authorization server, and everything the code under test produced.
type testBundle struct {
	t        *testing.T
	ctx      context.Context
	as       *oauthtest.Server
	srv      *dovecot.Server
	user     *dovecot.User
	dir      string
	account  config.Account
	env      mailendpoint.Env
	metrics  *prometheus.Registry
	logs     *capture.Buffer
	registry *resilience.Registry

	mu   sync.Mutex
	errs []error
}

// setup starts the authorization server and a Dovecot with the oauth2
// passdb (and opts), writes the OAuth secrets and the server's CA to files,
// and loads the account from MAILFATHOM_ variables with overrides applied
// (an empty value unsets one). Everything logs at debug level into
// b.logs, metrics register on b.metrics, and the test ends with the
// sentinel sweep.
func setup(t *testing.T, overrides map[string]string, opts ...dovecot.Option) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	as := oauthtest.Start(t)
	srv := dovecot.Start(t, append([]dovecot.Option{dovecot.WithOAuth2(as.IntrospectionURL())}, opts...)...)
	b := &testBundle{t: t, ctx: ctx, as: as, srv: srv, user: srv.NewUser(), dir: t.TempDir(), logs: &capture.Buffer{}, metrics: prometheus.NewRegistry()}
	b.writeFile("client-id", as.ClientID())
	b.writeFile("client-secret", as.ClientSecret())
	b.writeFile("refresh-token", as.Grant(b.user.Name()))
	b.writeFile("ca.pem", string(srv.CA().CA.CertPEM))

	const a = "MAILFATHOM_ACCOUNTS_0_"
	vars := map[string]string{
		a + "ID":       "Token-Account",
		a + "HOST":     srv.Host(),
		a + "PORT":     strconv.Itoa(srv.TLSPort()),
		a + "USERNAME": b.user.Name(),
		a + "PERMITTED_AUTHENTICATION_MECHANISMS": "XOAUTH2,OAUTHBEARER",
		a + "CERTIFICATE_TRUST":                   "AdditionalTrustedAuthority",
		a + "TRUSTED_CERTIFICATE_AUTHORITY":       "file:" + filepath.Join(b.dir, "ca.pem"),
		a + "OAUTH_TOKEN_ENDPOINT":                as.TokenURL(),
		a + "OAUTH_CLIENT_ID":                     "file:" + filepath.Join(b.dir, "client-id"),
		a + "OAUTH_CLIENT_SECRET":                 "file:" + filepath.Join(b.dir, "client-secret"),
		a + "OAUTH_REFRESH_TOKEN":                 "file:" + filepath.Join(b.dir, "refresh-token"),
		a + "OAUTH_SCOPE":                         "mail offline_access",
	}
	for k, v := range overrides {
		vars[k] = v
	}
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(environ)
	require.NoError(t, err)
	b.account = cfg.Accounts[0]

	logger := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	b.registry, err = outbound.NewRegistry(cfg.Resilience, logger, b.metrics)
	require.NoError(t, err)
	resolver := &secret.Resolver{}
	tokens, err := mailoauth.NewSource(mailoauth.Options{Resolver: resolver, Registry: b.registry, Logger: logger, Now: as.Now})
	require.NoError(t, err)
	b.env = mailendpoint.Env{Mode: cfg.SecretInterpretationMode, Resolver: resolver, Registry: b.registry, Tokens: tokens}
	t.Cleanup(b.sweep)
	return b
}

func (b *testBundle) writeFile(name, content string) {
	b.t.Helper()
	require.NoError(b.t, os.WriteFile(filepath.Join(b.dir, name), []byte(content), 0o600))
}

// connect opens a read session for the account the way a work unit does —
// the endpoint built now, the session established under the account's
// MailboxSessionEstablishment pipeline — lists the folders and closes it.
func (b *testBundle) connect() error {
	key := config.AccountKey(b.account.ID)
	err := b.registry.Execute(b.ctx, resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: key}, resilience.OperationFolderDiscovery, func(ctx context.Context) error {
		ep, err := mailendpoint.Endpoint(ctx, b.account, b.env)
		if err != nil {
			return err
		}
		s, err := imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{Logger: slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		if err != nil {
			return err
		}
		defer s.Close()
		_, err = s.ListFolders(ctx)
		return err
	})
	if err != nil {
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
	}
	return err
}

// statuses returns the statuses the token endpoint answered, in order.
func (b *testBundle) statuses() []int {
	var out []int
	for _, r := range b.as.TokenRequests() {
		out = append(out, r.Status)
	}
	return out
}

// logins returns Dovecot's login lines for the user, waiting up to
// dovecot.LogWait for want of them.
func (b *testBundle) logins(want int) []string {
	b.t.Helper()
	var out []string
	poll.Until(b.t, dovecot.LogWait, fmt.Sprintf("%d logins of the user in Dovecot's log", want), func() (bool, string) {
		out = out[:0]
		for _, line := range strings.Split(b.srv.Log(), "\n") {
			if strings.Contains(line, "Login: user=<"+b.user.Name()+">") {
				out = append(out, line)
			}
		}
		return len(out) >= want, fmt.Sprintf("%d: %q", len(out), out)
	})
	return out
}

// sweep fails the test when the client ID, the client secret, a refresh
// token or an access token appears in a log line, an error (in any
// format) or a metric the code under test produced.
func (b *testBundle) sweep() {
	t := b.t
	var sw capture.Sweep
	sw.Add("log", b.logs.String())
	b.mu.Lock()
	sw.Errors(b.errs...)
	b.mu.Unlock()
	require.NoError(t, sw.Metrics(b.metrics))
	secrets := append(b.as.Secrets(), b.as.ClientID())
	require.GreaterOrEqual(t, len(secrets), 3)
	sw.RequireNone(t, append(secrets, oauthtest.SecretMarker)...)
}

func TestTokenAccountAuthenticatesWithOAuthBearer(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.True(t, b.account.TransportSecurity.TokenOnly())
	require.NoError(t, b.connect())
	lines := b.logins(1)
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], "method=OAUTHBEARER", "OAUTHBEARER is preferred when both are offered")
	require.Equal(t, []int{200}, b.statuses())
	reqs := b.as.TokenRequests()
	require.Equal(t, "mail offline_access", reqs[0].Scope)
	require.Equal(t, b.as.Issued(), b.as.Introspections(), "Dovecot checked the token the endpoint issued")
}

func TestTokenAccountAuthenticatesWithXOAuth2(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS": "XOAUTH2"})
	require.NoError(t, b.connect())
	lines := b.logins(1)
	require.Len(t, lines, 1)
	require.Contains(t, lines[0], "method=XOAUTH2")
	require.Len(t, b.as.TokenRequests(), 1)
}

func TestTokenAccountOnAServerOfferingOnlyOAuthBearer(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, dovecot.WithAuthMechanisms("plain", "oauthbearer"))
	require.NoError(t, b.connect())
	require.Contains(t, b.logins(1)[0], "method=OAUTHBEARER")
}

// TestExpiredTokenIsRefreshedOnTheNextConnection: connections share the
// token while it is valid; once it has expired — introspection now calls
// it inactive — the next connection obtains a new one.
func TestExpiredTokenIsRefreshedOnTheNextConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.connect())
	require.NoError(t, b.connect())
	require.Len(t, b.as.TokenRequests(), 1, "the second connection reuses the token")
	first := b.as.Issued()[0]
	require.Equal(t, []string{first, first}, b.as.Introspections())

	b.as.Advance(oauthtest.DefaultLifetime + time.Second)
	require.NoError(t, b.connect())
	require.Equal(t, []int{200, 200}, b.statuses(), "the expired token was refreshed")
	issued := b.as.Issued()
	require.Len(t, issued, 2)
	require.Equal(t, []string{first, first, issued[1]}, b.as.Introspections())
	require.Len(t, b.logins(3), 3)
}

func TestTokenEndpoint503IsRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.as.FailNext(http.StatusServiceUnavailable, "temporarily_unavailable")
	require.NoError(t, b.connect())
	require.Equal(t, []int{503, 200}, b.statuses())
	require.Len(t, b.logins(1), 1)
	require.Contains(t, b.logs.String(), `"class":"MailAuthorizationServerInvocation"`)
	require.Contains(t, b.logs.String(), "retry scheduled")
}

// TestTokenEndpoint401IsTerminal: a refused client is asked once, by the
// token pipeline and by the establishment around it, and the mail server
// never sees a token.
func TestTokenEndpoint401IsTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.writeFile("client-secret", "not-the-secret")
	err := b.connect()
	require.Error(t, err)
	require.Equal(t, []int{401}, b.statuses(), "exactly one token request")
	var tokErr *imapx.TokenError
	require.ErrorAs(t, err, &tokErr)
	var te *mailoauth.TokenEndpointError
	require.ErrorAs(t, err, &te)
	require.Equal(t, http.StatusUnauthorized, te.HTTPStatus())
	require.Equal(t, "invalid_client", te.Code)
	require.False(t, imapx.IsTransient(err))
	require.Equal(t, resilience.Terminal, b.registry.Classify(resilience.MailboxSessionEstablishment, err))

	require.Empty(t, b.as.Introspections(), "no IMAP authentication was attempted with a token")
	require.Empty(t, b.logins(0))
	require.NotContains(t, b.srv.Log(), "oauth2(")
	require.NotContains(t, b.logs.String(), "retry scheduled")
	require.Contains(t, err.Error(), "401 Unauthorized (invalid_client)")
}

func TestRefusedTokenIsReplacedOnTheNextConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.connect())
	b.as.Revoke(b.as.Issued()[0])

	err := b.connect()
	var authErr *imapx.AuthenticationError
	require.ErrorAs(t, err, &authErr)
	require.Equal(t, "OAUTHBEARER", authErr.Mechanism)
	require.Equal(t, resilience.Terminal, b.registry.Classify(resilience.MailboxSessionEstablishment, err))
	require.Len(t, b.as.TokenRequests(), 1, "the refused token came from the cache")
	require.Len(t, b.as.Introspections(), 2, "a refused token is not retried")

	require.NoError(t, b.connect())
	require.Equal(t, []int{200, 200}, b.statuses(), "the refused token was forgotten")
}

func TestRotatedRefreshTokenReferenceIsUsedWithoutRestart(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	require.NoError(t, b.connect())
	old := strings.TrimSpace(readFile(t, filepath.Join(b.dir, "refresh-token")))
	b.writeFile("refresh-token", b.as.Grant(b.user.Name()))
	b.as.RevokeGrant(old)
	require.NoError(t, b.connect())
	require.Equal(t, []int{200, 200}, b.statuses(), "a rotated reference drops the cached token and is exchanged")
}

func TestTokenAccountNeedsATokenSource(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	env := b.env
	env.Tokens = nil
	_, err := mailendpoint.Endpoint(b.ctx, b.account, env)
	require.ErrorIs(t, err, mailendpoint.ErrNoTokenSource)

	ep, err := mailendpoint.Endpoint(b.ctx, b.account, b.env)
	require.NoError(t, err)
	require.Nil(t, ep.Password, "a token account has no password")
	require.NotNil(t, ep.Token)
	require.NotNil(t, ep.TLSConfig, "the trust anchor is loaded as for any account")
	// Building the endpoint obtains nothing: the token is requested by the
	// connection, after it has chosen its mechanism.
	require.Empty(t, b.as.TokenRequests())
	// A metric exists for the sweep.
	require.NoError(t, b.connect())
}

func TestPasswordAccountHasNoTokenSource(t *testing.T) {
	t.Parallel()
	b := setup(t, map[string]string{
		"MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS": "SCRAM-SHA-256",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD":                            "file:" + filepath.Join(t.TempDir(), "absent"),
		"MAILFATHOM_ACCOUNTS_0_OAUTH_TOKEN_ENDPOINT":                "",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_ID":                     "",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_CLIENT_SECRET":                 "",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_REFRESH_TOKEN":                 "",
		"MAILFATHOM_ACCOUNTS_0_OAUTH_SCOPE":                         "",
	})
	ep, err := mailendpoint.Endpoint(b.ctx, b.account, mailendpoint.Env{Mode: b.env.Mode, Resolver: b.env.Resolver, Registry: b.registry})
	require.NoError(t, err, "a password account needs no token source")
	require.Nil(t, ep.Token)
	require.NotNil(t, ep.Password)
	require.Equal(t, imapx.CompressionAuto, ep.Compression, "compression is auto by default")
	b.account.Compression = imapx.CompressionOff
	ep, err = mailendpoint.Endpoint(b.ctx, b.account, mailendpoint.Env{Mode: b.env.Mode, Resolver: b.env.Resolver, Registry: b.registry})
	require.NoError(t, err)
	require.Equal(t, imapx.CompressionOff, ep.Compression, "MAILFATHOM_ACCOUNTS_<i>_COMPRESSION=off")
	// A metric exists for the sweep.
	_, err = resilience.Get(b.ctx, b.registry, resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: "x"}, "noop", func(context.Context) (int, error) { return 0, nil })
	require.NoError(t, err)
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(b)
}
