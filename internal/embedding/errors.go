package embedding

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// Failure identities of an answer of the wrong shape. They are terminal:
// asking again gets the same answer.
const (
	// FailureDimensionMismatch: a vector's length is not the profile's
	// dimensions (the model is not the one configured, or the provider
	// ignores the requested geometry).
	FailureDimensionMismatch = "EmbeddingDimensionMismatch"
	// FailureCountMismatch: not one vector per text.
	FailureCountMismatch = "EmbeddingCountMismatch"
	// FailureAnswerMalformed: the answer is not an embeddings list.
	FailureAnswerMalformed = "EmbeddingAnswerMalformed"
	// FailureRequestRefused: the provider refused the request as a whole
	// (a status that is not worth repeating and says nothing of the input:
	// 401, 403, 404, ...), or no request could be made.
	FailureRequestRefused = "EmbeddingRequestRefused"
	// FailureInputRefused: the provider refused what the request carries
	// (400, 413 or 422): an input it will not embed, however often asked.
	// Client.EmbedEach isolates the input it refuses.
	FailureInputRefused = "EmbeddingInputRefused"
	// FailureProviderUnavailable: the provider did not answer or answered
	// with a status worth repeating.
	FailureProviderUnavailable = "EmbeddingProviderUnavailable"
	// FailureModelChanged: the provider's answer names another model than
	// the one the profile's vectors were computed with.
	FailureModelChanged = "EmbeddingModelChanged"
)

// StatusError is an answer with a status other than 2xx. Its text holds
// the status only, never the response body.
type StatusError struct {
	Status     int
	retryAfter time.Duration
}

func (e *StatusError) Error() string {
	return failure.Text(fmt.Sprintf("embedding: the provider answered %d %s", e.Status, http.StatusText(e.Status)), e.Identity())
}

// HTTPStatus implements resilience.HTTPStatuser: the Provider family
// repeats 408, 429 and 5xx.
func (e *StatusError) HTTPStatus() int { return e.Status }

// RetryAfter implements resilience.RetryAfterer: the wait the provider
// asked for, 0 for none.
func (e *StatusError) RetryAfter() time.Duration { return e.retryAfter }

// RetryLater reports whether a later attempt may succeed: the statuses
// the Provider family repeats.
func (e *StatusError) RetryLater() bool { return repeatableStatus(e.Status) }

// RefusesInput reports whether the status refuses the request's input
// rather than the request: 400, 413 or 422. 401, 403 and 404 (a key or a
// URL the provider does not accept) refuse every request alike.
func (e *StatusError) RefusesInput() bool { return inputStatus(e.Status) }

// Identity implements failure.Named.
func (e *StatusError) Identity() string {
	switch {
	case repeatableStatus(e.Status):
		return FailureProviderUnavailable
	case inputStatus(e.Status):
		return FailureInputRefused
	}
	return FailureRequestRefused
}

func repeatableStatus(s int) bool { return s == 408 || s == 429 || (s >= 500 && s <= 599) }

func inputStatus(s int) bool {
	return s == http.StatusBadRequest || s == http.StatusRequestEntityTooLarge || s == http.StatusUnprocessableEntity
}

// InputRefused reports whether err is a provider's refusal of the
// request's input (a failure with a RefusesInput method that says so and
// an HTTPStatus), and its status.
func InputRefused(err error) (int, bool) {
	var r interface {
		RefusesInput() bool
		HTTPStatus() int
	}
	if errors.As(err, &r) && r.RefusesInput() {
		return r.HTTPStatus(), true
	}
	return 0, false
}

// TransportError is a request whose answer never arrived.
type TransportError struct{ Err error }

func (e *TransportError) Error() string {
	return failure.Text("embedding: the provider did not answer: "+e.Err.Error(), e.Identity())
}

func (e *TransportError) Unwrap() error { return e.Err }

// RetryLater reports true unless the caller cancelled: an answer that
// never arrived may arrive next time.
func (e *TransportError) RetryLater() bool { return !errors.Is(e.Err, context.Canceled) }

// Identity implements failure.Named.
func (e *TransportError) Identity() string { return FailureProviderUnavailable }

// AnswerError is an answer of the wrong shape, or a request that could not
// be made; terminal.
type AnswerError struct {
	Name   string
	Reason string
}

func (e *AnswerError) Error() string { return failure.Text("embedding: "+e.Reason, e.Name) }

// Identity implements failure.Named.
func (e *AnswerError) Identity() string { return e.Name }

// RetryLater reports false: the same request gets the same answer.
func (e *AnswerError) RetryLater() bool { return false }

// ModelChangedError is an answer naming another model than the one its
// vectors must be of: the one recorded for the profile, or the one an
// earlier answer of the same call named. Its vectors are not comparable
// with those, so none is kept. Terminal: the provider keeps answering
// that model until it or the configuration changes. Its text names both
// models, which are configuration, not mail.
type ModelChangedError struct {
	// Recorded is the model the vectors must be of.
	Recorded string
	// Answered is the model the refused answer names.
	Answered string
}

func (e *ModelChangedError) Error() string {
	return failure.Text(fmt.Sprintf("embedding: the provider answered with model %q where the vectors are of model %q; "+
		"vectors of two models are never mixed, so this answer's are not kept", e.Answered, e.Recorded), e.Identity())
}

// Identity implements failure.Named.
func (e *ModelChangedError) Identity() string { return FailureModelChanged }

// RetryLater reports false: the provider answers the same model again.
func (e *ModelChangedError) RetryLater() bool { return false }
