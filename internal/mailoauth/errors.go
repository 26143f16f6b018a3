package mailoauth

import (
	"context"
	"errors"
	"net/http"
	"os"
	"strconv"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// Error is what Token returns when it could not produce an access token
// for an account. Its text names the account, the step and the cause's own
// safe text, never a secret or anything the server sent beyond a status
// and an error code.
type Error struct {
	// Account is the account key Token was called with.
	Account string
	// Step is what failed: resolving one of the references, or the
	// exchange at the token endpoint (StepExchange).
	Step string
	// Err is the cause: a *secret.Error, a *TokenEndpointError, a
	// *TransportError, an ErrMalformedResponse, a
	// *resilience.DependencyUnavailableError, or the caller's context
	// error.
	Err error
}

// The steps of Token an Error names.
const (
	StepResolveClientID     = "resolve the client ID"
	StepResolveClientSecret = "resolve the client secret"
	StepResolveRefreshToken = "resolve the refresh token"
	StepExchange            = "exchange the refresh token at the token endpoint"
)

func (e *Error) Error() string {
	return "mailoauth: account " + strconv.Quote(e.Account) + ": " + e.Step + ": " + e.Err.Error()
}

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }

// BudgetSpent reports whether the failure came out of the account's
// MailAuthorizationServerInvocation pipeline, which has then already
// retried it as far as its budget allowed: no enclosing pipeline (the
// mailbox session establishment a token request happens in) may repeat it,
// whatever its cause says, or one token request would be retried at two
// layers.
func (e *Error) BudgetSpent() bool { return e.Step == StepExchange }

// RetryLater declares whether the work that needed the token is worth
// attempting again later (the job failure classifier defers to it): yes
// when the authorization server declined the work — its pipeline imposed a
// limit, or a repeatable failure (408, 429, 5xx, no answer) survived every
// attempt —, no for a refusal (400, 401: a revoked grant or wrong client
// credentials stay wrong) and for a reference that does not resolve.
func (e *Error) RetryLater() bool {
	if e.Step != StepExchange {
		return false
	}
	return failure.IsDependencyUnavailable(e.Err) ||
		resilience.ProviderClassifier{}.Transient(e.Err)
}

// ErrNotTokenAccount is returned by Token for an OAuth block that lacks
// its token endpoint or one of its references; configuration refuses such
// a block, so it means a caller passed an account that is not a token
// account.
var ErrNotTokenAccount = errors.New("mailoauth: the account has no complete OAuth block")

// ErrMalformedResponse reports a token endpoint answer that is not what
// RFC 6749 §5.1 defines: not JSON, no access token, a token type other than
// Bearer, an access token outside the RFC 6750 §2.1 b64token syntax, or
// larger than MaxResponseBytes. It is terminal: asking again gets the same
// answer. Wrapped errors add a fixed reason, never the answer's content.
var ErrMalformedResponse = errors.New("mailoauth: the token endpoint's answer is malformed")

// TokenEndpointError reports that the token endpoint refused the refresh
// grant: any status other than 200, or a 200 whose body is an error
// response (RFC 6749 §5.2). Code is the OAuth error code when the server
// sent one of printable ASCII of at most 64 bytes, and empty otherwise; the
// error description and the rest of the body are never kept.
//
// HTTPStatus is what resilience.ProviderClassifier reads: 408, 429 and the
// 5xx class are retried within the budget, everything else is terminal.
type TokenEndpointError struct {
	Status int
	Code   string
}

func (e *TokenEndpointError) Error() string {
	s := "mailoauth: the token endpoint answered " + strconv.Itoa(e.Status)
	if text := http.StatusText(e.Status); text != "" {
		s += " " + text
	}
	if e.Code != "" {
		s += " (" + e.Code + ")"
	}
	return s
}

// HTTPStatus returns the status the token endpoint answered with
// (resilience.HTTPStatuser).
func (e *TokenEndpointError) HTTPStatus() int { return e.Status }

// TransportError reports a token request that got no answer: the
// connection could not be made or broke, TLS failed, or the request was
// abandoned. Its text names the kind of failure only — not the URL or the
// library's message. Unwrap returns the cause without net/http's
// *url.Error around it, so a network failure is a net.Error (transient for
// the pipeline) and a certificate the client refused is not.
type TransportError struct {
	Err error
}

func (e *TransportError) Error() string {
	return "mailoauth: the token request got no answer: " + transportKind(e.Err)
}

// Unwrap returns the cause.
func (e *TransportError) Unwrap() error { return e.Err }

func transportKind(err error) string {
	switch {
	case errors.Is(err, context.Canceled):
		return "cancelled"
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case failure.ConnectionLost(err):
		return failure.ConnectionLoss(err)
	}
	return "the request failed (TLS or protocol)"
}
