package mailsession

import (
	"errors"
	"fmt"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// MailboxUnavailableIdentity is the failure name a MailboxUnavailableError
// carries in its text, for operators reading River UI or the log.
const MailboxUnavailableIdentity = "MailboxUnavailable"

// MailboxUnavailableError reports that an account's mailbox could not be
// reached within the resilience budget: the pipeline imposed a limit (its
// circuit is open, its concurrency limit was reached, an attempt or the
// whole operation timed out) or a transient failure — a dropped
// connection, a server that stopped answering — survived every attempt.
// It is worth attempting again later, on the job's own schedule; it is
// never repeated by another pipeline, having spent its budget already.
//
// Its text names the account, the operation (a folder alias or
// folder-discovery) and the cause's kind, never server text or mail.
type MailboxUnavailableError struct {
	// Account is the account key, the pipelines' instance.
	Account string
	// Operation is the folder alias or resilience.OperationFolderDiscovery.
	Operation string
	// Err is the pipeline's *resilience.DependencyUnavailableError or the
	// last transient failure.
	Err error
}

func (e *MailboxUnavailableError) Error() string {
	return failure.Text(fmt.Sprintf("mailbox of account %q is unavailable for %s: %v", e.Account, e.Operation, e.Err), MailboxUnavailableIdentity)
}

// Identity implements failure.Named.
func (e *MailboxUnavailableError) Identity() string { return MailboxUnavailableIdentity }

// Unwrap returns the cause.
func (e *MailboxUnavailableError) Unwrap() error { return e.Err }

// BudgetSpent marks the failure as one whose resilience budget is spent, so
// no enclosing pipeline repeats it (see Classifier).
func (e *MailboxUnavailableError) BudgetSpent() bool { return true }

// RetryLater declares the failure worth attempting again on the job's own
// schedule (the job failure classifier defers to it).
func (e *MailboxUnavailableError) RetryLater() bool { return true }

// IsMailboxUnavailable reports whether err is or wraps a
// *MailboxUnavailableError.
func IsMailboxUnavailable(err error) bool {
	_, ok := errors.AsType[*MailboxUnavailableError](err)
	return ok
}
