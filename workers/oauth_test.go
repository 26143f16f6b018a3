package workers_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/oauthtest"
)

// TestOAuthAccountSynchronizes runs a token account through the workers:
// configured with an OAuth block and no password, it obtains an access
// token from the authorization server, authenticates to Dovecot's oauth2
// passdb with OAUTHBEARER (preferred when both token mechanisms are
// offered) and stores the folder. No client secret, refresh token or
// access token appears in the log, the jobs or the metrics.
func TestOAuthAccountSynchronizes(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	b := setupSync(t, dovecot.WithOAuth2(as.IntrospectionURL()))
	raws := seed(t, b.user, "INBOX", 3, 31)
	dir := t.TempDir()
	write := func(name, value string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(p, []byte(value), 0o600))
		return "file:" + p
	}
	const a = "MAILFATHOM_ACCOUNTS_0_"
	delete(b.env, a+"PASSWORD")
	b.env[a+"PERMITTED_AUTHENTICATION_MECHANISMS"] = "XOAUTH2,OAUTHBEARER"
	b.env[a+"OAUTH_TOKEN_ENDPOINT"] = as.TokenURL()
	b.env[a+"OAUTH_CLIENT_ID"] = write("client-id", as.ClientID())
	b.env[a+"OAUTH_CLIENT_SECRET"] = write("client-secret", as.ClientSecret())
	b.env[a+"OAUTH_REFRESH_TOKEN"] = write("refresh-token", as.Grant(b.user.Name()))
	b.start(t)
	b.waitIdle(t)

	require.Len(t, b.stored(t, "INBOX"), len(raws))
	require.Contains(t, b.server.Log(), "user=<"+b.user.Name()+">, method=OAUTHBEARER,")
	require.NotContains(t, b.server.Log(), "method=PLAIN")
	require.NotEmpty(t, as.TokenRequests())
	assertUnseen(t, b.user, "INBOX")

	var sw capture.Sweep
	sw.Add("log", b.logs.String())
	sw.Add("jobs", b.jobText(t))
	require.NoError(t, sw.Metrics(b.metrics))
	secrets := as.Secrets()
	require.GreaterOrEqual(t, len(secrets), 3, "client secret, refresh token, access token")
	sw.RequireNone(t, secrets...)
	families, err := b.metrics.Gather()
	require.NoError(t, err)
	var classes []string
	for _, f := range families {
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "class" {
					classes = append(classes, l.GetValue())
				}
			}
		}
	}
	require.Contains(t, classes, "MailAuthorizationServerInvocation", "the token request ran under its own pipeline")
}
