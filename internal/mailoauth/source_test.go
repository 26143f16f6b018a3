package mailoauth_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
)

func TestRefreshGrantIsSentAsRFC6749Prescribes(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	tok := b.mustToken()
	require.Equal(t, b.as.Issued(), []string{tok})
	reqs := b.as.TokenRequests()
	require.Len(t, reqs, 1)
	require.Equal(t, "refresh_token", reqs[0].GrantType)
	require.Equal(t, "mail offline_access", reqs[0].Scope)
	require.True(t, reqs[0].BasicAuth, "RFC 6749 §2.3.1: the client authenticates with HTTP Basic")
	require.False(t, reqs[0].CredentialsInBody)

	b.block.Scope = ""
	b.mustToken()
	reqs = b.as.TokenRequests()
	require.Len(t, reqs, 2, "another scope is another grant: the cached token is not used")
	require.Empty(t, reqs[1].Scope, "no scope requested keeps the grant's own")
}

func TestTokenIsCachedUntilShortlyBeforeItExpires(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	first, err := b.token()
	require.NoError(t, err)
	again, err := b.token()
	require.NoError(t, err)
	require.Equal(t, string(first), string(again))
	clear(first)
	require.NotEqual(t, string(first), string(again), "every caller gets its own copy to wipe")
	require.Equal(t, []int{200}, b.requests())

	// Valid for an hour, replaced a minute before it expires.
	b.as.Advance(58 * time.Minute)
	require.Equal(t, string(again), b.mustToken())
	require.Len(t, b.requests(), 1)
	b.as.Advance(90 * time.Second)
	renewed := b.mustToken()
	require.NotEqual(t, string(again), renewed)
	require.Equal(t, []int{200, 200}, b.requests())
	require.Contains(t, b.logs.String(), `"msg":"access token obtained"`)
}

func TestTokenWithoutLifetimeServesOneConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	b.as.SetLifetime(0)
	require.NotEqual(t, b.mustToken(), b.mustToken())
	require.Len(t, b.requests(), 2)

	// Nor is one cached whose lifetime is inside the margin.
	b.as.SetLifetime(30 * time.Second)
	b.mustToken()
	b.mustToken()
	require.Len(t, b.requests(), 4)
}

// TestStatusDecidesRetry checks the single retry layer: the pipeline
// repeats what the token endpoint invites again (408, 429, 5xx) and
// nothing else, and the HTTP client adds no attempt of its own.
func TestStatusDecidesRetry(t *testing.T) {
	t.Parallel()
	for _, status := range []int{408, 429, 500, 502, 503, 504} {
		t.Run("retried "+http.StatusText(status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOptions{})
			b.as.FailNext(status, "temporarily_unavailable")
			b.mustToken()
			require.Equal(t, []int{status, 200}, b.requests())
			require.Contains(t, b.logs.String(), "retry scheduled")
			require.Contains(t, b.logs.String(), "*mailoauth.TokenEndpointError")
		})
	}
	for _, tc := range []struct {
		status int
		code   string
	}{{400, "invalid_request"}, {401, "invalid_client"}, {403, ""}, {404, ""}, {302, ""}} {
		t.Run("terminal "+http.StatusText(tc.status), func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOptions{})
			b.as.FailNext(tc.status, tc.code)
			_, err := b.token()
			require.Error(t, err)
			require.Equal(t, []int{tc.status}, b.requests(), "exactly one token request")
			var te *mailoauth.TokenEndpointError
			require.ErrorAs(t, err, &te)
			require.Equal(t, tc.status, te.HTTPStatus())
			require.Equal(t, tc.code, te.Code)
			var me *mailoauth.Error
			require.ErrorAs(t, err, &me)
			require.Equal(t, mailoauth.StepExchange, me.Step)
			require.True(t, me.BudgetSpent(), "no enclosing pipeline repeats it")
			require.NotContains(t, b.logs.String(), "retry scheduled")
		})
	}
}

func TestRetriesStopAtTheBudget(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	for range 4 {
		b.as.FailNext(http.StatusServiceUnavailable, "temporarily_unavailable")
	}
	_, err := b.token()
	var te *mailoauth.TokenEndpointError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 503, te.Status)
	require.Equal(t, "temporarily_unavailable", te.Code)
	require.Equal(t, []int{503, 503, 503}, b.requests(), "MaxAttempts is 3")
	require.Equal(t, `mailoauth: account "primary": exchange the refresh token at the token endpoint: mailoauth: the token endpoint answered 503 Service Unavailable (temporarily_unavailable)`, err.Error())
}

func TestRevokedGrantIsTerminal(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	b.as.RevokeGrant(readFile(t, b.block.RefreshToken))
	_, err := b.token()
	var te *mailoauth.TokenEndpointError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 400, te.Status)
	require.Equal(t, "invalid_grant", te.Code)
	require.Len(t, b.requests(), 1)
}

func TestStalledEndpointIsAbandonedAtTheAttemptTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{budget: func(bu *resilience.Budget) {
		bu.MaxAttempts, bu.AttemptTimeout, bu.TotalTimeout = 2, 200*time.Millisecond, 5*time.Second
	}})
	b.as.StallNext()
	b.as.StallNext()
	begin := time.Now()
	_, err := b.token()
	require.Less(t, time.Since(begin), 3*time.Second)
	require.True(t, failure.IsDependencyUnavailable(err), "%v", err)
	var du *resilience.DependencyUnavailableError
	require.ErrorAs(t, err, &du)
	require.Equal(t, resilience.RejectionAttemptTimeout, du.Rejection)
	require.Equal(t, resilience.MailAuthorizationServerInvocation, du.Class)
	require.Equal(t, account, du.Instance)
	require.Len(t, b.requests(), 2, "an abandoned attempt is retried within the budget")

	// The next call is not held up by the stalled ones.
	b.mustToken()
}

func TestMalformedAnswersAreTerminal(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body string
	}{
		{"not JSON", "access_token=abc"},
		{"no access token", `{"token_type":"Bearer","expires_in":3600}`},
		{"empty access token", `{"access_token":"","token_type":"Bearer"}`},
		{"access token with a space", `{"access_token":"SENTINEL ab","token_type":"Bearer"}`},
		{"access token with 0x01", `{"access_token":"SENTINEL\u0001ab","token_type":"Bearer"}`},
		{"access token not a string", `{"access_token":12345,"token_type":"Bearer"}`},
		{"another token type", `{"access_token":"SENTINELab","token_type":"mac"}`},
		{"lifetime not a number", `{"access_token":"SENTINELab","expires_in":"soon"}`},
		{"negative lifetime", `{"access_token":"SENTINELab","expires_in":-5}`},
		{"refresh token not a string", `{"access_token":"SENTINELab","refresh_token":7}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOptions{})
			b.as.AnswerNext(http.StatusOK, tc.body)
			_, err := b.token()
			require.ErrorIs(t, err, mailoauth.ErrMalformedResponse)
			require.Len(t, b.requests(), 1)
			require.NotContains(t, err.Error(), "SENTINEL")
			require.NotContains(t, err.Error(), "12345")
		})
	}

	t.Run("error with status 200", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOptions{})
		b.as.AnswerNext(http.StatusOK, `{"error":"invalid_grant","error_description":"SENTINEL expired"}`)
		_, err := b.token()
		var te *mailoauth.TokenEndpointError
		require.ErrorAs(t, err, &te)
		require.Equal(t, 200, te.Status)
		require.Equal(t, "invalid_grant", te.Code)
		require.Len(t, b.requests(), 1, "a 200 carrying an error is not retried")
	})

	t.Run("error code of free text", func(t *testing.T) {
		t.Parallel()
		b := setup(t, setupOptions{})
		b.as.AnswerNext(http.StatusBadRequest, `{"error":"call SENTINEL on 555 1234"}`)
		_, err := b.token()
		var te *mailoauth.TokenEndpointError
		require.ErrorAs(t, err, &te)
		require.Empty(t, te.Code)
	})
}

func TestLenientAnswersAreRead(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, body, token string
		cached            bool
	}{
		{"escaped slash, lifetime as string", `{"access_token":"ya29.a0\/b+c==","token_type":"bearer","expires_in":"3600"}`, "ya29.a0/b+c==", true},
		{"no token type, no lifetime", `{"access_token":"EwBAA-_~.x"}`, "EwBAA-_~.x", false},
		{"null refresh token and scope", `{"access_token":"abc","token_type":"Bearer","expires_in":3600,"refresh_token":null,"scope":"mail"}`, "abc", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, setupOptions{})
			b.as.AnswerNext(http.StatusOK, tc.body)
			require.Equal(t, tc.token, b.mustToken())
			if tc.cached {
				require.Equal(t, tc.token, b.mustToken())
				require.Len(t, b.requests(), 1)
			}
		})
	}
}

func TestRotatedRefreshTokenIsKeptInMemory(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	b.as.RotateRefreshTokens(true)
	b.mustToken()
	b.as.Advance(time.Hour)
	// The configured refresh token is no longer valid: only the one the
	// server rotated it into gets a token.
	b.mustToken()
	b.as.Advance(time.Hour)
	b.mustToken()
	require.Equal(t, []int{200, 200, 200}, b.requests())
	require.Contains(t, b.logs.String(), `"refresh_token_rotated":true`)
	require.Contains(t, b.logs.String(), `"rotated_refresh_token_used":true`)

	// An operator who provisions a new refresh token overrides the rotated
	// one, at once, without waiting for the cached token to expire.
	b.writeSecret("refresh-token", b.as.Grant("alice"))
	b.mustToken()
	require.Len(t, b.requests(), 4)
	require.Contains(t, b.logs.String(), `"rotated_refresh_token_used":false`)
}

func TestRotatedReferenceIsReadByTheNextCall(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	good := b.mustToken()

	// A rotated client secret is another grant: the cached token is
	// dropped and the new secret used, here a wrong one.
	b.writeSecret("client-secret", "wrong-secret")
	_, err := b.token()
	var te *mailoauth.TokenEndpointError
	require.ErrorAs(t, err, &te)
	require.Equal(t, 401, te.Status)
	require.Equal(t, "invalid_client", te.Code)
	require.Equal(t, []int{200, 401}, b.requests())

	b.writeSecret("client-secret", b.as.ClientSecret())
	require.NotEqual(t, good, b.mustToken())
	require.Equal(t, []int{200, 401, 200}, b.requests())
}

func TestUnresolvableReferenceSendsNothing(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	b.block.ClientSecret.Target += ".missing"
	_, err := b.token()
	var me *mailoauth.Error
	require.ErrorAs(t, err, &me)
	require.Equal(t, mailoauth.StepResolveClientSecret, me.Step)
	require.False(t, me.BudgetSpent())
	require.ErrorIs(t, err, &secret.Error{Failure: secret.SecretNotResolvable})
	require.Empty(t, b.requests())
	require.NotContains(t, err.Error(), b.dir, "no reference target is named")

	_, err = b.src.Token(b.ctx, account, config.OAuth{TokenEndpoint: b.as.TokenURL()})
	require.ErrorIs(t, err, mailoauth.ErrNotTokenAccount)
}

func TestConcurrentCallsShareOneExchange(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	// Rotation makes a second concurrent refresh with the same refresh
	// token fail: serialization is what keeps every call succeeding.
	b.as.RotateRefreshTokens(true)
	var wg sync.WaitGroup
	tokens := make([]string, 8)
	for i := range tokens {
		wg.Go(func() {
			tok, err := b.token()
			if err == nil {
				tokens[i] = string(tok)
			}
		})
	}
	wg.Wait()
	for _, tok := range tokens {
		require.Equal(t, tokens[0], tok)
	}
	require.NotEmpty(t, tokens[0])
	require.Equal(t, []int{200}, b.requests())
}

func TestForgetDropsTheCachedToken(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	b.as.RotateRefreshTokens(true)
	refused := b.mustToken()
	b.src.Forget(account)
	require.NotEqual(t, refused, b.mustToken(), "a refused token is not handed out again")
	require.Equal(t, []int{200, 200}, b.requests(), "the rotated refresh token survived Forget")
}

func TestAccountsAreIndependent(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	b.as.FailNext(http.StatusUnauthorized, "invalid_client")
	_, err := b.src.Token(b.ctx, "other", b.block)
	require.Error(t, err)
	b.mustToken()
	_, err = b.src.Token(b.ctx, "other", b.block)
	require.NoError(t, err, "the other account's failure is not cached")
	require.Equal(t, []int{401, 200, 200}, b.requests(), "each account has its own token")
}

func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	var elsewhere atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { elsewhere.Add(1) }))
	t.Cleanup(target.Close)
	redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, target.URL, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(redirect.Close)
	b := setup(t, setupOptions{})
	b.block.TokenEndpoint = redirect.URL
	_, err := b.token()
	var te *mailoauth.TokenEndpointError
	require.ErrorAs(t, err, &te)
	require.Equal(t, http.StatusTemporaryRedirect, te.Status)
	require.Zero(t, elsewhere.Load(), "the credentials went nowhere else")
}

func TestUnreachableEndpointIsTransient(t *testing.T) {
	t.Parallel()
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()
	b := setup(t, setupOptions{})
	b.block.TokenEndpoint = closed.URL + "/token"
	_, err := b.token()
	var tr *mailoauth.TransportError
	require.ErrorAs(t, err, &tr)
	require.Equal(t, "mailoauth: the token request got no answer: connection refused", tr.Error())
	require.Equal(t, resilience.Transient, b.registry.Classify(resilience.MailAuthorizationServerInvocation, tr))
	require.Contains(t, b.logs.String(), "retry scheduled", "a connection refused is retried")
}

// TestClassification pins what the provider family makes of
// this package's failures, which is what the pipeline retries on.
func TestClassification(t *testing.T) {
	t.Parallel()
	class := resilience.MailAuthorizationServerInvocation
	reg, err := outbound.NewRegistry(nil, nil, nil)
	require.NoError(t, err)
	for status, want := range map[int]resilience.Verdict{
		200: resilience.Terminal, 302: resilience.Terminal, 400: resilience.Terminal, 401: resilience.Terminal,
		403: resilience.Terminal, 408: resilience.Transient, 429: resilience.Transient,
		500: resilience.Transient, 503: resilience.Transient, 504: resilience.Transient,
	} {
		require.Equal(t, want, reg.Classify(class, &mailoauth.TokenEndpointError{Status: status}), "status %d", status)
	}
	require.Equal(t, resilience.Terminal, reg.Classify(class, mailoauth.ErrMalformedResponse))
	require.Equal(t, resilience.Canceled, reg.Classify(class, &mailoauth.TransportError{Err: context.Canceled}))
	require.Equal(t, resilience.Terminal, reg.Classify(class, &mailoauth.TransportError{Err: errors.New("x509: certificate signed by unknown authority")}))
}

func TestTokenInsideSessionEstablishment(t *testing.T) {
	t.Parallel()
	b := setup(t, setupOptions{})
	// A token request is made while a session is being established: a
	// different class, so it nests.
	err := b.registry.Execute(b.ctx, resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: account}, "folder-discovery", func(ctx context.Context) error {
		_, err := b.src.Token(ctx, account, b.block)
		return err
	})
	require.NoError(t, err)
	// Inside its own class it would be a second retry layer.
	err = b.registry.Execute(b.ctx, resilience.Key{Class: resilience.MailAuthorizationServerInvocation, Instance: account}, "outer", func(ctx context.Context) error {
		b.src.Forget(account)
		_, err := b.src.Token(ctx, account, b.block)
		return err
	})
	require.ErrorIs(t, err, resilience.ErrNestedSameClass)
	require.Len(t, b.requests(), 1)
}

func TestNewSourceValidates(t *testing.T) {
	t.Parallel()
	reg, err := outbound.NewRegistry(nil, nil, nil)
	require.NoError(t, err)
	_, err = mailoauth.NewSource(mailoauth.Options{Registry: reg})
	require.Error(t, err)
	_, err = mailoauth.NewSource(mailoauth.Options{Resolver: &secret.Resolver{}})
	require.Error(t, err)
	_, err = mailoauth.NewSource(mailoauth.Options{Resolver: &secret.Resolver{}, Registry: reg, RefreshMargin: -time.Second})
	require.Error(t, err)
	src, err := mailoauth.NewSource(mailoauth.Options{Resolver: &secret.Resolver{}, Registry: reg})
	require.NoError(t, err)
	require.NotNil(t, src)
}

// TestDefaultBudgetFitsInsideEstablishment pins why the defaults are what
// they are: a token request's attempt timeout, and its whole budget, sit
// well inside the establishment attempt that encloses it, so a hung
// authorization server surfaces as itself.
func TestDefaultBudgetFitsInsideEstablishment(t *testing.T) {
	t.Parallel()
	budgets := resilience.DefaultBudgets()
	token, establishment := budgets[resilience.MailAuthorizationServerInvocation], budgets[resilience.MailboxSessionEstablishment]
	require.LessOrEqual(t, 3*token.AttemptTimeout, establishment.AttemptTimeout)
	require.Less(t, token.TotalTimeout, establishment.AttemptTimeout)
}

func readFile(t *testing.T, ref secret.Reference) string {
	t.Helper()
	b, err := (&secret.Resolver{}).Resolve(context.Background(), ref)
	require.NoError(t, err)
	return string(b)
}
