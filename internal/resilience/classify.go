package resilience

import (
	"context"
	"errors"
	"io"
	"net"
	"net/textproto"
	"os"
	"syscall"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
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

// Classifier decides whether a failure of one family is worth repeating.
// The pipeline asks it about every failed attempt; it is never asked about
// nil. An attempt the pipeline abandoned at its per-attempt timeout is
// presented as ErrAttemptTimeout.
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

// Classify returns the verdict of the class's family on err, using the
// families' own rules (not a Registry's overrides). The caller's own
// cancellation (context.Canceled anywhere in err's chain) is Canceled in
// every family; an undeclared class and a nil error are Terminal.
func Classify(class DependencyClass, err error) Verdict {
	if err == nil {
		return Terminal
	}
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	if BudgetSpent(err) {
		return Terminal
	}
	c := FamilyClassifier(class.Family())
	if c != nil && c.Transient(err) {
		return Transient
	}
	return Terminal
}

// FamilyClassifier returns the classifier of a protocol family, or nil for
// an unknown family.
func FamilyClassifier(f Family) Classifier {
	switch f {
	case FamilyMailbox:
		return MailboxClassifier{}
	case FamilyDelivery:
		return DeliveryClassifier{}
	case FamilyDatabase:
		return DatabaseClassifier{}
	case FamilyProvider:
		return ProviderClassifier{}
	}
	return nil
}

// MailboxClassifier is the Mailbox family: imapx's verdict, plus an attempt
// timeout. A rejected credential, an unusable TLS handshake, an
// unavailable authentication mechanism and a refused IMAP command are
// terminal; a dropped connection, a server disconnect, a desynchronized
// protocol stream and an abandoned attempt are transient, because a
// repeated read changes nothing on the server.
type MailboxClassifier struct{}

// Transient implements Classifier.
func (MailboxClassifier) Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || BudgetSpent(err) {
		return false
	}
	return errors.Is(err, ErrAttemptTimeout) || imapx.IsTransient(err)
}

// SMTPCoder is implemented by an SMTP client's reply error.
type SMTPCoder interface {
	SMTPCode() int
}

// DeliveryClassifier is the Delivery family: only an explicit 4yz reply is
// repeatable (a *textproto.Error, which net/smtp returns for a reply, or an
// error with an SMTPCode method), which is the server stating it did not
// take the message. A connection lost between the message data and the
// final reply looks like any other network failure, so repeating it risks a
// second copy in the recipient's mailbox: everything that is not a
// temporary rejection, an attempt timeout included, is terminal and left to
// the outbox.
type DeliveryClassifier struct{}

// Transient implements Classifier.
func (DeliveryClassifier) Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || BudgetSpent(err) {
		return false
	}
	if tp, ok := errors.AsType[*textproto.Error](err); ok {
		return tp.Code >= 400 && tp.Code <= 499
	}
	var sc SMTPCoder
	if errors.As(err, &sc) {
		code := sc.SMTPCode()
		return code >= 400 && code <= 499
	}
	return false
}

// SQLSTATEs the Database family repeats: serialization failure and
// deadlock.
const (
	sqlstateSerializationFailure = "40001"
	sqlstateDeadlockDetected     = "40P01"
)

// DatabaseClassifier is the Database family: pgx's own verdicts, no second
// SQLSTATE table. Transient: pgconn.SafeToRetry (nothing reached the
// server), pgconn.Timeout, a failure to connect (*pgconn.ConnectError, unless
// the server answered it with an authorization refusal, SQLSTATE class 28,
// which is a rejected credential rather than a connection failure), a
// serialization failure (40001) or deadlock (40P01), and an abandoned
// attempt. A concurrency conflict (mailstore.IsConcurrencyConflict) is
// terminal on purpose: the optimistic-concurrency retry owns it, and the
// pipeline must not become a second layer around the same rows.
type DatabaseClassifier struct{}

// Transient implements Classifier.
func (DatabaseClassifier) Transient(err error) bool {
	if err == nil || errors.Is(err, context.Canceled) || BudgetSpent(err) || mailstore.IsConcurrencyConflict(err) {
		return false
	}
	if errors.Is(err, ErrAttemptTimeout) || pgconn.SafeToRetry(err) || pgconn.Timeout(err) {
		return true
	}
	pgErr, isPgErr := errors.AsType[*pgconn.PgError](err)
	if _, ok := errors.AsType[*pgconn.ConnectError](err); ok {
		return !isPgErr || len(pgErr.Code) < 2 || pgErr.Code[:2] != "28"
	}
	return isPgErr && (pgErr.Code == sqlstateSerializationFailure || pgErr.Code == sqlstateDeadlockDetected)
}

// HTTPStatuser is implemented by a provider or authorization-server error
// that carries the HTTP status the remote party answered with.
type HTTPStatuser interface {
	HTTPStatus() int
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
	if err == nil || errors.Is(err, context.Canceled) || BudgetSpent(err) {
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
	return ConnectionLost(err)
}

// ConnectionLost reports a failure that says the connection under a call
// went away or never came up — a network error (timeouts included), a
// connection reset or refused, a broken pipe, a stream closed or cut short
// — so no answer arrived. Whether that is worth repeating is each
// family's, or each caller's, decision.
func ConnectionLost(err error) bool {
	var ne net.Error
	if errors.As(err, &ne) {
		return true
	}
	return errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) || errors.Is(err, net.ErrClosed) ||
		errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.EPIPE)
}
