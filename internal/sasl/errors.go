package sasl

import (
	"errors"
	"strconv"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// MechanismUnavailableIdentity is the stable identity of the failure that
// ends an attempt because no permitted mechanism can be used. It appears in
// brackets at the end of the error's text.
const MechanismUnavailableIdentity = "MailAuthenticationMechanismUnavailable"

// ErrMechanismUnavailable reports that the server offers no mechanism the
// account permits and the clear-text LOGIN command is not an allowed
// fallback. Nothing was sent: the attempt ends before any credential is
// needed. errors.Is matches every *MechanismUnavailableError.
var ErrMechanismUnavailable = failure.New(MechanismUnavailableIdentity, "sasl: no permitted authentication mechanism is available")

// MechanismUnavailableError is ErrMechanismUnavailable with the reason. The
// reason is this package's own sentence: it never holds server text, a user
// name or a credential.
type MechanismUnavailableError struct {
	Reason string
}

func (e *MechanismUnavailableError) Error() string {
	return failure.Text("sasl: no permitted authentication mechanism is available: "+e.Reason, MechanismUnavailableIdentity)
}

// Identity implements failure.Named.
func (e *MechanismUnavailableError) Identity() string { return MechanismUnavailableIdentity }

// Is makes errors.Is(err, ErrMechanismUnavailable) true.
func (e *MechanismUnavailableError) Is(target error) bool { return target == ErrMechanismUnavailable }

// ErrNoMechanismLeft is what a Negotiator returns once every mechanism it
// started with has failed. It is not ErrMechanismUnavailable: the server did
// offer a permitted mechanism and answered it, so the caller reports the
// failure it saw last.
var ErrNoMechanismLeft = errors.New("sasl: every permitted mechanism the server offers has failed")

// ErrServerSignatureMismatch reports a SCRAM server-final message whose
// ServerSignature (RFC 5802 §3) is not the one the password yields: the
// server cannot prove it knows the password, so it is not the server the
// account is configured for. The connection must be closed; no other
// mechanism should be tried on it (a Negotiator told of this error ends).
var ErrServerSignatureMismatch = errors.New("sasl: SCRAM: the server's signature is wrong: it cannot prove it knows the password")

// ErrServerNotVerified reports a SCRAM exchange the server ended with
// success before sending its signature (RFC 5802 §5: the client must verify
// it). Like ErrServerSignatureMismatch it means the server's identity is not
// proven, and the now authenticated connection must be closed.
var ErrServerNotVerified = errors.New("sasl: SCRAM: the server reported success without proving it knows the password")

// ExchangeError reports that the mechanism's client itself ended the
// exchange: its Start or Next returned Err, because the server's challenge
// broke the mechanism's rules (ErrMalformedChallenge, an
// *IterationCountError), the server's SCRAM server-final message carried
// an error (*ScramServerError) or a wrong signature
// (ErrServerSignatureMismatch), or the credential cannot be expressed in
// the mechanism (ErrPasswordNotPreparable, ErrUsernameNotPreparable,
// ErrWrongCredential). Authenticate returns it, so a caller can tell the
// mechanism's refusals, which the same server and credential produce
// again, from a connection that failed with nothing from the mechanism.
// Its text is Err's, which never holds a credential, a user name or text
// the server chose.
type ExchangeError struct {
	Err error
}

func (e *ExchangeError) Error() string { return e.Err.Error() }

func (e *ExchangeError) Unwrap() error { return e.Err }

// ErrMalformedChallenge reports a server challenge that does not follow the
// mechanism's grammar. Wrapped errors name the mechanism and the rule, never
// the challenge's content.
var ErrMalformedChallenge = errors.New("sasl: malformed server challenge")

// ErrPasswordNotPreparable reports a password that SASLprep (RFC 4013)
// refuses: not UTF-8, or holding a prohibited character such as a control
// character, or breaking the bidirectional rules. SCRAM cannot use it;
// the error does not say which character it was.
var ErrPasswordNotPreparable = errors.New("sasl: SCRAM: the password is not valid under SASLprep (RFC 4013)")

// ErrUsernameNotPreparable is ErrPasswordNotPreparable for the user name.
var ErrUsernameNotPreparable = errors.New("sasl: SCRAM: the user name is not valid under SASLprep (RFC 4013)")

// ErrWrongCredential reports credentials of the wrong shape for a
// mechanism: a password for a token mechanism, a token for a password
// mechanism, or none at all.
var ErrWrongCredential = errors.New("sasl: the credentials do not fit the mechanism")

// ErrNotImplemented reports a mechanism this package does not implement.
var ErrNotImplemented = errors.New("sasl: mechanism not implemented")

// IterationCountError reports a SCRAM server-first message whose iteration
// count is outside [Min, Max]. Fewer than MinIterations makes the salted
// password cheap to attack (RFC 5802 §9, RFC 7677 §4 ask for at least 4096);
// more than MaxIterations lets a server make the client burn CPU.
type IterationCountError struct {
	Count, Min, Max int
}

func (e *IterationCountError) Error() string {
	return "sasl: SCRAM: the server's iteration count " + strconv.Itoa(e.Count) +
		" is outside the accepted range " + strconv.Itoa(e.Min) + " to " + strconv.Itoa(e.Max)
}

// ScramServerError is a SCRAM server-final message carrying "e="
// (RFC 5802 §7, server-error-value). Value is one of the registered values,
// or "other-error" when the server sent anything else, so the text is never
// free-form server text.
type ScramServerError struct {
	Value string
}

func (e *ScramServerError) Error() string {
	return "sasl: SCRAM: the server reported " + e.Value
}

// Refusal reports whether the server refused the authentication itself —
// the proof (invalid-proof), the user (unknown-user,
// invalid-username-encoding), or for a reason it names only as
// no-resources or other-error (every unregistered value included) — rather
// than the client's use of the protocol: its encoding, an extension, or
// channel binding.
func (e *ScramServerError) Refusal() bool {
	switch e.Value {
	case "invalid-proof", "unknown-user", "invalid-username-encoding", "no-resources", "other-error":
		return true
	}
	return false
}

// scramServerErrors are the server-error-value names of RFC 5802 §7.
var scramServerErrors = map[string]bool{
	"invalid-encoding":                    true,
	"extensions-not-supported":            true,
	"invalid-proof":                       true,
	"channel-bindings-dont-match":         true,
	"server-does-support-channel-binding": true,
	"channel-binding-not-supported":       true,
	"unsupported-channel-binding-type":    true,
	"unknown-user":                        true,
	"invalid-username-encoding":           true,
	"no-resources":                        true,
	"other-error":                         true,
}

// BearerTokenError reports a bearer token the server refused: the error
// challenge of XOAUTH2 or OAUTHBEARER (RFC 7628 §3.2.2). Status is the
// challenge's "status" when it is a short token such as "401" or
// "invalid_token", and empty otherwise. Err is the server's final response
// to the exchange, usually an *imap.Error NO, and is what Unwrap returns.
type BearerTokenError struct {
	Mechanism string
	Status    string
	Err       error
}

func (e *BearerTokenError) Error() string {
	s := "sasl: " + e.Mechanism + ": the server refused the bearer token"
	if e.Status != "" {
		s += " (status " + e.Status + ")"
	}
	return s
}

func (e *BearerTokenError) Unwrap() error { return e.Err }

// safeStatus returns s when it is a short token of letters, digits and
// "._-", and "" otherwise, so a server cannot put free text into an error.
func safeStatus(s string) string {
	if len(s) == 0 || len(s) > 32 {
		return ""
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
		default:
			return ""
		}
	}
	return s
}
