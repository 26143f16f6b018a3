// Package failure gives MailFathom's failures their stable names.
//
// A failure an operator may see — in the log, in River UI, from a command —
// carries an identity: a word such as MailAuthenticationRejected that
// names what went wrong, stays the same from release to release, and never
// holds anything from mail, a server's text or a secret. Its text ends with
// the identity in brackets, so a log query can match on it while the
// sentence around it is free to change.
//
// A failure type says its identity with an Identity method; a sentinel is
// a *Error made with New. Identity finds the identity of any failure.
package failure

import (
	"errors"
	"strings"
)

// Named is a failure that carries its identity.
type Named interface {
	error
	// Identity returns the failure's stable name.
	Identity() string
}

// Identity returns the identity of the outermost failure in err's chain
// that has one, and false when none has.
func Identity(err error) (string, bool) {
	var n Named
	if errors.As(err, &n) {
		if id := n.Identity(); id != "" {
			return id, true
		}
	}
	return "", false
}

// Text returns reason followed by identity in brackets, the form of every
// named failure's text: "the server refused the password
// [MailAuthenticationRejected]". An identity already at the end of reason
// is not repeated.
func Text(reason, identity string) string {
	suffix := " [" + identity + "]"
	if identity == "" || strings.HasSuffix(reason, suffix) {
		return reason
	}
	return reason + suffix
}

// Error is a named failure: a sentinel made with New, or a failure wrapped
// with Wrap to give it an identity.
type Error struct {
	// Name is the identity.
	Name string
	// Reason is the text without the identity. It never holds mail, a
	// server's text or a secret.
	Reason string
	// Err is the cause, if any.
	Err error
}

// New returns a named sentinel failure.
func New(identity, reason string) *Error {
	return &Error{Name: identity, Reason: reason}
}

// Wrap names err: the result's text is err's followed by identity in
// brackets, and err stays reachable with errors.Is and errors.As.
func Wrap(identity string, err error) *Error {
	return &Error{Name: identity, Reason: err.Error(), Err: err}
}

// Error returns the reason and the identity in brackets.
func (e *Error) Error() string { return Text(e.Reason, e.Name) }

// Identity returns the failure's name.
func (e *Error) Identity() string { return e.Name }

// Unwrap returns the cause.
func (e *Error) Unwrap() error { return e.Err }
