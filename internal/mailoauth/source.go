package mailoauth

import (
	"cmp"
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"log/slog"
	"net/http"
	"sync"
	"time"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// DefaultRefreshMargin is how long before its expiry a cached access token
// is replaced when Options.RefreshMargin is zero: long enough that a token
// handed to a connection is still valid when the server checks it.
const DefaultRefreshMargin = time.Minute

// OperationTokenRefresh is the operation name token exchanges run under in
// the MailAuthorizationServerInvocation pipeline, for its log lines.
const OperationTokenRefresh = "token-refresh"

// Options configures a Source.
type Options struct {
	// Resolver resolves the OAuth block's references for every call.
	// Required.
	Resolver *secret.Resolver
	// Registry runs every exchange under the
	// MailAuthorizationServerInvocation pipeline of its account. Required.
	Registry *resilience.Registry
	// HTTPClient sends the token requests. Nil means NewHTTPClient(); a
	// client given here must not retry or time out on its own either.
	HTTPClient *http.Client
	// Logger receives a line per exchange with the account, the lifetime
	// and whether the refresh token was rotated — never a token. Nil
	// discards.
	Logger *slog.Logger
	// Now is the clock token lifetimes are measured on. Nil means
	// time.Now.
	Now func() time.Time
	// RefreshMargin is how long before its expiry a cached token is
	// replaced. Zero means DefaultRefreshMargin.
	RefreshMargin time.Duration
}

// Source obtains the access tokens of token accounts and keeps each
// account's current token (and a refresh token the server rotated) in
// memory. Build one per process with NewSource; it is safe for concurrent
// use.
type Source struct {
	resolver *secret.Resolver
	registry *resilience.Registry
	client   *http.Client
	logger   *slog.Logger
	now      func() time.Time
	margin   time.Duration
	// key keys the fingerprints of the material a token was obtained with,
	// so the fingerprints kept in memory reveal nothing offline.
	key []byte

	mu       sync.Mutex
	accounts map[string]*accountState
}

// accountState is one account's tokens. lock serializes the account's
// calls; the fields are read and written only while it is held.
type accountState struct {
	lock chan struct{}

	token       []byte
	expiry      time.Time
	fingerprint []byte // of everything the token was obtained with
	rotated     []byte // a refresh token the server issued, or nil
	lineage     []byte // of the configured refresh token it replaced
}

// NewSource returns a Source. It fails without a resolver or a registry,
// or with a negative refresh margin.
func NewSource(o Options) (*Source, error) {
	if o.Resolver == nil || o.Registry == nil {
		return nil, errors.New("mailoauth: a resolver and a resilience registry are required")
	}
	if o.RefreshMargin < 0 {
		return nil, errors.New("mailoauth: the refresh margin must not be negative")
	}
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Source{
		resolver: o.Resolver,
		registry: o.Registry,
		client:   cmp.Or(o.HTTPClient, NewHTTPClient()),
		logger:   cmp.Or(o.Logger, slog.New(slog.DiscardHandler)),
		now:      o.Now,
		margin:   cmp.Or(o.RefreshMargin, DefaultRefreshMargin),
		key:      key,
		accounts: map[string]*accountState{},
	}, nil
}

// Token returns an access token for the account keyed account (the
// pipeline instance: config.AccountKey of its ID) whose OAuth block
// is block, in a new slice the caller wipes once it has been sent.
//
// It resolves block's references now, returns the account's cached token
// when it was obtained with the same material and is not within
// RefreshMargin of expiring, and otherwise exchanges the refresh token — or
// the one the server rotated it into — at the token endpoint under the
// account's MailAuthorizationServerInvocation pipeline (RFC 6749 §6).
// Calls for one account are serialized.
//
// Every failure is an *Error. One from the exchange (StepExchange) has
// already been retried as far as the pipeline's budget allows.
func (s *Source) Token(ctx context.Context, account string, block config.OAuth) ([]byte, error) {
	if account == "" || block.TokenEndpoint == "" || block.ClientID.IsZero() || block.ClientSecret.IsZero() || block.RefreshToken.IsZero() {
		return nil, &Error{Account: account, Step: "check the OAuth block", Err: ErrNotTokenAccount}
	}
	var m material
	defer m.wipe()
	if err := m.resolve(ctx, s.resolver, block); err != nil {
		return nil, &Error{Account: account, Step: m.failed, Err: err}
	}

	st := s.state(account)
	select {
	case st.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, &Error{Account: account, Step: StepExchange, Err: ctx.Err()}
	}
	defer func() { <-st.lock }()

	fingerprint := s.fingerprint(block.TokenEndpoint, m.clientID, m.clientSecret, m.refreshToken, []byte(block.Scope))
	lineage := s.fingerprint(block.TokenEndpoint, m.clientID, m.refreshToken)
	now := s.now()
	if st.token != nil && hmac.Equal(st.fingerprint, fingerprint) && now.Before(st.expiry.Add(-s.margin)) {
		return append([]byte(nil), st.token...), nil
	}
	st.dropToken()

	refresh := m.refreshToken
	rotatedUsed := false
	if st.rotated != nil {
		if hmac.Equal(st.lineage, lineage) {
			refresh, rotatedUsed = st.rotated, true
		} else {
			// The operator replaced the configured refresh token: it wins
			// over one the server rotated the old one into.
			clear(st.rotated)
			st.rotated, st.lineage = nil, nil
		}
	}

	g := grant{endpoint: block.TokenEndpoint, clientID: m.clientID, clientSecret: m.clientSecret, refreshToken: refresh, scope: block.Scope}
	key := resilience.Key{Class: resilience.MailAuthorizationServerInvocation, Instance: account}
	t, err := resilience.Get(ctx, s.registry, key, OperationTokenRefresh, func(ctx context.Context) (*issued, error) {
		return exchange(ctx, s.client, g)
	})
	if err != nil {
		s.logger.LogAttrs(ctx, slog.LevelDebug, "access token not obtained",
			slog.String("account", account), slog.String("failure_type", failure.Name(err)))
		return nil, &Error{Account: account, Step: StepExchange, Err: err}
	}
	defer t.wipe()

	rotated := t.refreshToken != nil && !hmac.Equal(t.refreshToken, refresh)
	if rotated {
		clear(st.rotated)
		st.rotated, st.lineage = append([]byte(nil), t.refreshToken...), lineage
	}
	cached := t.expiresIn > s.margin
	if cached {
		st.token = append([]byte(nil), t.accessToken...)
		st.expiry = now.Add(t.expiresIn)
		st.fingerprint = fingerprint
	}
	s.logger.LogAttrs(ctx, slog.LevelDebug, "access token obtained",
		slog.String("account", account), slog.Duration("expires_in", t.expiresIn), slog.Bool("cached", cached),
		slog.Bool("refresh_token_rotated", rotated), slog.Bool("rotated_refresh_token_used", rotatedUsed))
	return append([]byte(nil), t.accessToken...), nil
}

// Forget drops the account's cached access token, so the next Token call
// obtains a new one. A connection calls it when the mail server refused
// the token (revoked, or expired early). A refresh token the server
// rotated is kept: it is the grant, not the refused token.
func (s *Source) Forget(account string) {
	st := s.state(account)
	st.lock <- struct{}{}
	st.dropToken()
	<-st.lock
}

func (s *Source) state(account string) *accountState {
	s.mu.Lock()
	defer s.mu.Unlock()
	st, ok := s.accounts[account]
	if !ok {
		st = &accountState{lock: make(chan struct{}, 1)}
		s.accounts[account] = st
	}
	return st
}

func (st *accountState) dropToken() {
	clear(st.token)
	st.token, st.expiry, st.fingerprint = nil, time.Time{}, nil
}

// fingerprint is an HMAC under s.key of the parts, each length-prefixed.
func (s *Source) fingerprint(endpoint string, parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, s.key)
	write := func(p []byte) {
		var n [8]byte
		for i, l := 0, uint64(len(p)); i < 8; i++ {
			n[i] = byte(l >> (8 * i))
		}
		mac.Write(n[:])
		mac.Write(p)
	}
	write([]byte(endpoint))
	for _, p := range parts {
		write(p)
	}
	return mac.Sum(nil)
}

// material is what the OAuth block's references resolved to for one call.
type material struct {
	clientID, clientSecret, refreshToken []byte
	// failed names the step that failed.
	failed string
}

func (m *material) resolve(ctx context.Context, r *secret.Resolver, g config.OAuth) error {
	var err error
	if m.clientID, err = r.Resolve(ctx, g.ClientID); err != nil {
		m.failed = StepResolveClientID
		return err
	}
	if m.clientSecret, err = r.Resolve(ctx, g.ClientSecret); err != nil {
		m.failed = StepResolveClientSecret
		return err
	}
	if m.refreshToken, err = r.Resolve(ctx, g.RefreshToken); err != nil {
		m.failed = StepResolveRefreshToken
		return err
	}
	return nil
}

func (m *material) wipe() {
	clear(m.clientID)
	clear(m.clientSecret)
	clear(m.refreshToken)
}
