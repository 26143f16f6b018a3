package secret

import (
	"strings"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// Failure is the stable identity of a secret failure. Operators and log
// queries match on it; the surrounding prose may change.
type Failure string

// The failure identities.
const (
	// ReferenceMalformed means the reference does not parse: an unknown
	// scheme, an empty target, or a target the scheme cannot accept.
	ReferenceMalformed Failure = "ReferenceMalformed"
	// MaterialMissing means no reference is configured at all.
	MaterialMissing Failure = "MaterialMissing"
	// SecretNotResolvable means the reference produced no material: the
	// file or variable is missing, unreadable, empty, or too large.
	SecretNotResolvable Failure = "SecretNotResolvable"
)

// Error is a secret failure. Its text names the scheme (when known), the
// failure identity and a fixed reason, and never the reference's target or
// any material.
type Error struct {
	// Failure is the stable failure identity.
	Failure Failure
	// Scheme is the reference's scheme, or empty when it is not known.
	Scheme string
	// Reason is a fixed, operator-facing explanation.
	Reason string
	// cause is a sanitized sentinel (fs.ErrNotExist, fs.ErrPermission, a
	// context error) kept for errors.Is; never an error carrying a path.
	cause error
}

// Error implements error.
func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("secret")
	if e.Scheme != "" {
		b.WriteString(" (")
		b.WriteString(e.Scheme)
		b.WriteString(")")
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return failure.Text(b.String(), string(e.Failure))
}

// Identity implements failure.Named.
func (e *Error) Identity() string { return string(e.Failure) }

// Unwrap returns the sanitized cause, if any, so errors.Is(err,
// fs.ErrNotExist) and errors.Is(err, context.Canceled) work.
func (e *Error) Unwrap() error { return e.cause }

// Is reports whether target is an *Error with the same Failure, so
// errors.Is(err, &secret.Error{Failure: secret.SecretNotResolvable}) works.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Failure == e.Failure && (t.Scheme == "" || t.Scheme == e.Scheme) && t.Reason == ""
}

func malformed(scheme, reason string) *Error {
	return &Error{Failure: ReferenceMalformed, Scheme: scheme, Reason: reason}
}

func notResolvable(scheme, reason string, cause error) *Error {
	return &Error{Failure: SecretNotResolvable, Scheme: scheme, Reason: reason, cause: cause}
}
