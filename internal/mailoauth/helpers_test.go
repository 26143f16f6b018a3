package mailoauth_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/oauthtest"
)

// account is the pipeline instance the tests use.
const account = "primary"

// testBundle is one test's authorization server, secret files, source and
// everything they produced that a secret must not appear in.
type testBundle struct {
	t        *testing.T
	ctx      context.Context
	as       *oauthtest.Server
	dir      string
	block    config.OAuth
	registry *resilience.Registry
	metrics  *prometheus.Registry
	logs     *capture.Buffer
	src      *mailoauth.Source

	mu   sync.Mutex
	errs []error
}

type setupOptions struct {
	budget func(b *resilience.Budget)
	source func(o *mailoauth.Options)
}

// setup starts an authorization server with a grant for "alice", writes
// the client ID, client secret and refresh token to files the block
// references, and builds a Source on a registry whose authorization-server
// budget backs off in milliseconds. Both the source and the registry log
// at debug level into b.logs. The test ends with the sentinel sweep.
func setup(t *testing.T, o setupOptions) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	as := oauthtest.Start(t)
	b := &testBundle{t: t, ctx: ctx, as: as, dir: t.TempDir(), logs: &capture.Buffer{}, metrics: prometheus.NewRegistry()}
	b.writeSecret("client-id", as.ClientID())
	b.writeSecret("client-secret", as.ClientSecret())
	b.writeSecret("refresh-token", as.Grant("alice"))
	b.block = config.OAuth{
		TokenEndpoint: as.TokenURL(),
		ClientID:      secret.Reference{Scheme: secret.SchemeFile, Target: filepath.Join(b.dir, "client-id")},
		ClientSecret:  secret.Reference{Scheme: secret.SchemeFile, Target: filepath.Join(b.dir, "client-secret")},
		RefreshToken:  secret.Reference{Scheme: secret.SchemeFile, Target: filepath.Join(b.dir, "refresh-token")},
		Scope:         "mail offline_access",
	}
	budget := resilience.DefaultBudgets()[resilience.MailAuthorizationServerInvocation]
	budget.BaseDelay, budget.MaxDelay = 5*time.Millisecond, 20*time.Millisecond
	if o.budget != nil {
		o.budget(&budget)
	}
	logger := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	reg, err := outbound.NewRegistry(map[resilience.DependencyClass]resilience.Budget{
		resilience.MailAuthorizationServerInvocation: budget,
	}, logger, b.metrics)
	require.NoError(t, err)
	b.registry = reg
	opts := mailoauth.Options{Resolver: &secret.Resolver{}, Registry: reg, Logger: logger, Now: as.Now}
	if o.source != nil {
		o.source(&opts)
	}
	b.src, err = mailoauth.NewSource(opts)
	require.NoError(t, err)
	t.Cleanup(b.sweep)
	return b
}

func (b *testBundle) writeSecret(name, value string) {
	b.t.Helper()
	require.NoError(b.t, os.WriteFile(filepath.Join(b.dir, name), []byte(value+"\n"), 0o600))
}

// token calls Token for the account and records its error for the sweep.
func (b *testBundle) token() ([]byte, error) {
	tok, err := b.src.Token(b.ctx, account, b.block)
	if err != nil {
		b.mu.Lock()
		b.errs = append(b.errs, err)
		b.mu.Unlock()
	}
	return tok, err
}

// mustToken is token that must succeed.
func (b *testBundle) mustToken() string {
	b.t.Helper()
	tok, err := b.token()
	require.NoError(b.t, err)
	return string(tok)
}

// requests returns the statuses the token endpoint answered, in order.
func (b *testBundle) requests() []int {
	var out []int
	for _, r := range b.as.TokenRequests() {
		out = append(out, r.Status)
	}
	return out
}

// sweep fails the test when a secret the authorization server made, or the
// client ID, appears in a log line, an error the source returned (in every
// format) or a metric.
func (b *testBundle) sweep() {
	t := b.t
	var sw capture.Sweep
	sw.Add("log", b.logs.String())
	b.mu.Lock()
	sw.Errors(b.errs...)
	b.mu.Unlock()
	require.NoError(t, sw.Metrics(b.metrics))
	secrets := append(b.as.Secrets(), b.as.ClientID())
	sw.RequireNone(t, append(secrets, oauthtest.SecretMarker)...)
}
