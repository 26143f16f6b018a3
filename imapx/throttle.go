package imapx

import (
	"errors"
	"time"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
	"github.com/mailfathom/mailfathom/internal/failure"
)

// A server that refuses work for a while — the account is over a command,
// bandwidth or connection limit, a subsystem is down — says so in one of
// a few ways, and may say so at any step: in the greeting (a BYE), in
// answer to LOGIN or AUTHENTICATE, in answer to any later command (a
// tagged NO), or by ending the session with an unsolicited BYE. Every one
// of them is a *ThrottledError here, whichever client layer read it
// (go-imap's, or the adapter's own in package wire): its reason is a fixed
// word derived from the answer, and the server's text is never kept.

// ThrottledIdentity is the failure name of a *ThrottledError.
const ThrottledIdentity = "MailboxThrottled"

// ThrottleReason is why a server refused work for a while, as a fixed word.
type ThrottleReason string

// The throttling reasons, one per form a server says it in.
const (
	// ThrottleUnavailable: the response code [UNAVAILABLE] (RFC 5530 §3),
	// a subsystem is down for now.
	ThrottleUnavailable ThrottleReason = wire.ThrottleUnavailable
	// ThrottleLimit: [LIMIT] (RFC 5530 §3), an implementation limit such
	// as the connections a user may hold.
	ThrottleLimit ThrottleReason = wire.ThrottleLimit
	// ThrottleOverQuota: [OVERQUOTA] (RFC 5530 §3).
	ThrottleOverQuota ThrottleReason = wire.ThrottleOverQuota
	// ThrottleInUse: [INUSE] (RFC 5530 §3), another session holds what
	// the command needs.
	ThrottleInUse ThrottleReason = wire.ThrottleInUse
	// ThrottleThrottled: [THROTTLED].
	ThrottleThrottled ThrottleReason = wire.ThrottleThrottled
	// ThrottleRequestThrottled: Microsoft 365's "Request is throttled.
	// Suggested Backoff Time: N milliseconds", or any answer that
	// suggests a backoff time.
	ThrottleRequestThrottled ThrottleReason = wire.ThrottleRequestThrottled
	// ThrottleBandwidthExceeded: Gmail's "Account exceeded command or
	// bandwidth limits".
	ThrottleBandwidthExceeded ThrottleReason = wire.ThrottleBandwidthExceeded
	// ThrottleTooManyConnections: Gmail's "Too many simultaneous
	// connections".
	ThrottleTooManyConnections ThrottleReason = wire.ThrottleTooManyConnections
)

// MaxSuggestedDelay bounds ThrottledError.Delay: a server suggesting more
// is read as suggesting this.
const MaxSuggestedDelay = wire.MaxSuggestedDelay

// ThrottledError reports that the server refused work for a while. It is
// not transient in the sense of IsTransient: repeating the command now is
// what the server asked not to be done, so no resilience pipeline repeats
// it; it is worth attempting again later (RetryLater), after Delay when
// the server suggested one.
//
// Err is what the answer is besides: a *CommandError for a tagged NO or
// BAD (a refused LOGIN or AUTHENTICATE among them — a throttled login is
// not a rejected credential), after which the connection stays usable; a
// *TransportError for a BYE, in the greeting or mid-session, after which
// the connection is gone. Both stay reachable with errors.As.
type ThrottledError struct {
	// Reason is why, as a fixed word.
	Reason ThrottleReason
	// Delay is the wait the server suggested, 0 when it suggested none.
	Delay time.Duration
	Err   error
}

func (e *ThrottledError) Error() string {
	s := e.Err.Error() + ": the server throttles the account (" + string(e.Reason)
	if e.Delay > 0 {
		s += ", suggested wait " + e.Delay.String()
	}
	return failure.Text(s+")", e.Identity())
}

func (e *ThrottledError) Unwrap() error { return e.Err }

// Identity implements failure.Named.
func (e *ThrottledError) Identity() string { return ThrottledIdentity }

// RetryLater declares the failure worth attempting again later, on a
// schedule and never at once.
func (e *ThrottledError) RetryLater() bool { return true }

// AsThrottled returns the *ThrottledError in err's chain.
func AsThrottled(err error) (*ThrottledError, bool) {
	return errors.AsType[*ThrottledError](err)
}

// throttled returns err as a *ThrottledError when t throttles, and err
// unchanged otherwise.
func throttled(t wire.Throttle, err error) error {
	if !t.Throttles() {
		return err
	}
	return &ThrottledError{Reason: ThrottleReason(t.Reason), Delay: t.Delay, Err: err}
}
