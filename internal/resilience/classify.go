package resilience

import (
	"context"
	"errors"
	"time"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// Verdict is what classification says about repeating a failed call.
type Verdict int

const (
	// Terminal: repeating the call is damage or futile. Anything
	// unrecognized is terminal, because an unrecognized rejection repeated
	// against a mail server is exactly what locks a mailbox account.
	Terminal Verdict = iota
	// Transient: the failure clears on its own; repeating the call is
	// recovery.
	Transient
	// Canceled: the caller's own cancellation, which is neither: it is
	// never repeated and never reported as a dependency failure.
	Canceled
)

// String returns "terminal", "transient" or "canceled".
func (v Verdict) String() string {
	switch v {
	case Transient:
		return "transient"
	case Canceled:
		return "canceled"
	}
	return "terminal"
}

// Classifier decides whether a failure of one protocol family is worth
// repeating. The pipeline asks it about every failed attempt; it is never
// asked about nil, about the caller's own cancellation or about a failure
// whose budget is already spent (BudgetSpent), which are never repeated. An
// attempt the pipeline abandoned at its per-attempt timeout is presented as
// ErrAttemptTimeout.
//
// Each adapter owns the classifier of its family — the IMAP adapter the
// Mailbox rules, the database adapter PostgreSQL's — and hands it to
// NewRegistry; this package knows no adapter's errors. Anything a
// classifier does not recognize must be terminal, because an unrecognized
// rejection repeated against a mail server is exactly what locks a mailbox
// account.
type Classifier interface {
	Transient(err error) bool
}

// ClassifierFunc adapts a function to Classifier.
type ClassifierFunc func(err error) bool

// Transient calls f.
func (f ClassifierFunc) Transient(err error) bool { return f(err) }

// ErrAttemptTimeout is how a classifier is shown an attempt the pipeline
// abandoned at the class's AttemptTimeout (its context was cancelled).
// Whether that is worth repeating is the family's call: a stalled read is,
// a submission that may already have been accepted is not.
var ErrAttemptTimeout = errors.New("resilience: the attempt exceeded its timeout")

// HTTPStatuser is implemented by a provider or authorization-server error
// that carries the HTTP status the remote party answered with.
type HTTPStatuser interface {
	HTTPStatus() int
}

// RetryAfterer is implemented by a failure whose remote party said how
// long to wait before asking again (an HTTP Retry-After). The pipeline
// waits at least that long before the next attempt; a wait the total
// timeout cannot hold ends the operation with that failure, so the
// request is honoured within the budget and never beyond it.
type RetryAfterer interface {
	RetryAfter() time.Duration
}

// ProviderClassifier is the Provider family, for chat, embedding and
// authorization-server calls alike, because what a status says about the
// remote party does not depend on what was asked of it. An error carrying
// a status (HTTPStatuser) is repeatable for 408, 429 and 5xx and terminal
// for every other status. Without a status, a failure that means the
// response never arrived — a network error, a connection reset or refused,
// a response cut short, an abandoned attempt — is repeatable; everything
// else (a refused credential, a rejected request, an answer of the wrong
// shape) is terminal.
type ProviderClassifier struct{}

// Transient implements Classifier.
func (ProviderClassifier) Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || failure.IsBudgetSpent(err) {
		return false
	}
	var hs HTTPStatuser
	if errors.As(err, &hs) {
		status := hs.HTTPStatus()
		return status == 408 || status == 429 || (status >= 500 && status <= 599)
	}
	if errors.Is(err, ErrAttemptTimeout) {
		return true
	}
	return failure.ConnectionLost(err)
}
