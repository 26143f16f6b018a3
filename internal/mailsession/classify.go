package mailsession

import (
	"errors"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// Classifier is the Mailbox family's failure classifier, which the
// resilience registry applies to both mailbox classes. A rejected
// credential, an authentication exchange the client broke off, an unusable
// TLS handshake, an unavailable authentication mechanism and a refused IMAP
// command are terminal; a dropped connection, a server disconnect, a
// desynchronized protocol stream and an attempt the pipeline abandoned are
// transient, because a repeated read changes nothing on the server.
// Everything else is terminal (imapx.IsTransient decides the adapter's own
// failures).
//
// A server that throttles (*imapx.ThrottledError, at establishment or
// mid-session) is not transient either: the server asked not to be asked
// again now, so neither pipeline repeats the call — repeating it within
// seconds is the tight loop that keeps an account throttled — and, since
// the breaker counts only what is worth repeating, it does not open the
// account's circuit, which would turn the account's next units into
// failures. It reaches the caller as itself; waiting for the server's
// suggested time is the job's, through its snooze, the one layer that
// waits for it.
var Classifier resilience.Classifier = resilience.ClassifierFunc(transient)

func transient(err error) bool {
	if err == nil || failure.IsBudgetSpent(err) {
		return false
	}
	return errors.Is(err, resilience.ErrAttemptTimeout) || imapx.IsTransient(err)
}
