package imapx

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/sasl"
)

// Error texts name the command, the status and the response code only: a
// server's response text, a folder path, a user name or anything taken from
// a message never appears in one, because any of them can carry personal
// data and errors end up in logs. The underlying cause stays reachable
// through errors.Is/As where one exists.

// ErrMailboxFolderRecreated is returned by Recover when the folder it
// re-examined reports another UIDVALIDITY than when it was first examined:
// it is no longer the folder the run started on. Until the next Examine, the
// session refuses to search or fetch in it.
var ErrMailboxFolderRecreated = failure.New("MailboxFolderRecreated", "imapx: the open folder was recreated (UIDVALIDITY changed)")

// ErrFolderListTooLarge is returned by ListFolders when the server lists more
// folders than SessionOptions.MaxListedFolders.
var ErrFolderListTooLarge = failure.New("FolderListTooLarge", "imapx: the server lists more folders than the limit")

// ErrStartTLSUnavailable is returned by OpenReadSession in StartTLSRequired
// mode when the server does not advertise STARTTLS (or greets with PREAUTH,
// after which STARTTLS is no longer possible). It is terminal.
var ErrStartTLSUnavailable = failure.New("StartTlsUnavailable", "imapx: STARTTLS is required but the server does not offer it")

// ErrLoginDisabled is returned by OpenReadSession when the server offers
// neither AUTH=PLAIN nor the LOGIN command (LOGINDISABLED), which Dovecot
// does on a connection it does not consider secured. It is terminal.
var ErrLoginDisabled = failure.New("LoginDisabled", "imapx: the server offers no usable authentication mechanism (LOGINDISABLED)")

// ErrProtocolViolation marks a server answer that parsed but cannot be
// right: a folder without UIDVALIDITY, a search result with "*" or more UIDs
// than any folder holds, bytes sent ahead of the TLS handshake after
// STARTTLS. It is terminal: repeating the request gets the same answer.
var ErrProtocolViolation = wire.ErrProtocolViolation

// ErrNoFolder is returned by the search and fetch operations when no folder
// is open (Examine was not called or failed).
var ErrNoFolder = wire.ErrNoFolder

// ErrIncompleteAnswer is returned by Reconcile when the server's answer
// leaves out data the command asked for: a FETCH response that names a UID
// of the window without its FLAGS, or a UID SEARCH that completed without a
// SEARCH or ESEARCH response. Such an answer is refused rather than read as
// the silence a deleted message produces. It is terminal for the run (the
// next run asks again); the connection stays usable.
var ErrIncompleteAnswer = failure.New("MailboxAnswerIncomplete", "imapx: the server's answer leaves out data the command asked for")

// ErrMalformedResponse is the cause of a *TransportError when the response
// stream of the reconciliation connection could not be parsed, or exceeded
// a bound (line, literal, nesting, count): the conversation can no longer
// be trusted, so the connection is closed. It is transient, like every
// *TransportError.
var ErrMalformedResponse = wire.ErrMalformedResponse

// ErrNotificationOverflow is the cause of a *TransportError when a server
// said, with an untagged NOTIFICATIONOVERFLOW (RFC 5465 §5.8), that it
// stopped reporting changes to a watching session: the subscription is
// gone, so the connection is closed and the watch starts again from a
// connection of its own.
var ErrNotificationOverflow = wire.ErrNotificationOverflow

// AuthenticationError reports that the server rejected the credential, a
// password or a bearer token: it answered NO, refused a bearer token with
// its error challenge (whether it then answered NO or dropped the
// connection), ended a SCRAM exchange with an error refusing the proof or
// the user, or could not prove it knows the password (SCRAM). It is
// terminal: repeating a rejected credential is how an account gets locked.
type AuthenticationError struct {
	// Mechanism is the SASL mechanism of AUTHENTICATE, such as "PLAIN",
	// "SCRAM-SHA-256" or "OAUTHBEARER", or "LOGIN" for the LOGIN command.
	Mechanism string
	// Code is the response code, e.g. "AUTHENTICATIONFAILED"; a SCRAM
	// server error value such as "invalid-proof" or "unknown-user";
	// "ServerNotVerified" when the server did not prove it knows the
	// password; may be empty.
	Code string
}

func (e *AuthenticationError) Error() string {
	s := "imapx: authentication rejected (" + e.Mechanism
	if e.Code != "" {
		s += " [" + e.Code + "]"
	}
	return failure.Text(s+")", e.Identity())
}

// Identity implements failure.Named.
func (e *AuthenticationError) Identity() string { return "MailAuthenticationRejected" }

// AuthenticationExchangeIdentity is the identity of an
// *AuthenticationExchangeError.
const AuthenticationExchangeIdentity = "MailAuthenticationExchangeRefused"

// AuthenticationExchangeError reports an authentication the client itself
// broke off because the SASL exchange cannot succeed, whoever tries it
// again:
//
//   - the server's challenge breaks the mechanism's grammar or is not
//     base64 (sasl.ErrMalformedChallenge), or asks for an unexpected step;
//   - a SCRAM server demands an iteration count outside the accepted range
//     (*sasl.IterationCountError), or ends the exchange with an error about
//     the protocol rather than the credential (a channel-binding, encoding
//     or extension complaint, *sasl.ScramServerError);
//   - the credential cannot be expressed in the mechanism: a password or
//     user name SASLprep refuses (sasl.ErrPasswordNotPreparable,
//     sasl.ErrUsernameNotPreparable), or a credential of the wrong kind
//     (sasl.ErrWrongCredential).
//
// It is terminal, like a rejected credential: the same server and the same
// credential produce it again, and each repetition is one more
// authentication attempt against the account. The connection was closed.
// Err is the internal/sasl error and stays reachable with errors.Is and
// errors.As; the text is this package's own fixed reason.
type AuthenticationExchangeError struct {
	// Mechanism is the SASL mechanism of AUTHENTICATE, e.g. "SCRAM-SHA-256".
	Mechanism string
	Err       error
}

func (e *AuthenticationExchangeError) Error() string {
	return failure.Text("imapx: authentication exchange refused ("+e.Mechanism+"): "+e.reason(), e.Identity())
}

// reason names what went wrong in a fixed sentence: sasl's texts hold no
// secret either, but errors of other libraries that can reach here are not
// known to be as careful.
func (e *AuthenticationExchangeError) reason() string {
	var (
		iter    *sasl.IterationCountError
		scram   *sasl.ScramServerError
		corrupt base64.CorruptInputError
	)
	switch {
	case errors.Is(e.Err, sasl.ErrMalformedChallenge), errors.As(e.Err, &corrupt):
		return "the server's challenge does not follow the mechanism"
	case errors.As(e.Err, &iter):
		return "the server's SCRAM iteration count is outside the accepted range"
	case errors.As(e.Err, &scram):
		// Value is one of RFC 5802's registered names.
		return "the server reported the SCRAM error " + scram.Value
	case errors.Is(e.Err, sasl.ErrPasswordNotPreparable):
		return "the password is not valid under SASLprep (RFC 4013)"
	case errors.Is(e.Err, sasl.ErrUsernameNotPreparable):
		return "the user name is not valid under SASLprep (RFC 4013)"
	case errors.Is(e.Err, sasl.ErrWrongCredential):
		return "the credential does not fit the mechanism"
	case errors.Is(e.Err, sasl.ErrNotImplemented):
		return "the mechanism is not implemented"
	}
	return "the mechanism ended the exchange"
}

func (e *AuthenticationExchangeError) Unwrap() error { return e.Err }

// Identity implements failure.Named.
func (e *AuthenticationExchangeError) Identity() string { return AuthenticationExchangeIdentity }

// TokenError reports that a token account's access token could not be
// obtained (Endpoint.Token failed), so nothing was sent to the mail server.
// It is terminal here, whatever its cause: the token source runs the
// token request under its own resilience pipeline, which has already
// retried what was worth retrying, and repeating the establishment around
// it would make a second retry layer around one token request. Err is the
// source's error, reachable with errors.As (such as a
// *resilience.DependencyUnavailableError or an HTTP status); its text is
// kept, since a token source's errors carry no secret (internal/mailoauth
// guarantees that).
type TokenError struct {
	Err error
}

func (e *TokenError) Error() string {
	return failure.Text("imapx: obtain access token: "+e.Err.Error(), e.Identity())
}

func (e *TokenError) Unwrap() error { return e.Err }

// Identity implements failure.Named: MailAuthorizationServerUnavailable
// when the token source says the work is worth attempting again later (its
// authorization server declined it: a limit its pipeline imposed, or an
// overload that outlived every attempt), MailAccessTokenUnavailable
// otherwise (a grant the server refused, a misconfigured endpoint).
func (e *TokenError) Identity() string {
	if later, _ := failure.WorthRetryingLater(e.Err); later || failure.IsDependencyUnavailable(e.Err) {
		return "MailAuthorizationServerUnavailable"
	}
	return "MailAccessTokenUnavailable"
}

// CommandError reports that the server answered a command with NO or BAD. It
// is terminal; the connection stays usable.
type CommandError struct {
	Command string // e.g. "EXAMINE", "UID FETCH"
	Status  string // "NO" or "BAD"
	Code    string // response code, e.g. "NONEXISTENT"; may be empty
}

func (e *CommandError) Error() string {
	s := "imapx: " + e.Command + " answered " + e.Status
	if e.Code != "" {
		s += " [" + e.Code + "]"
	}
	return failure.Text(s, e.Identity())
}

// Identity implements failure.Named.
func (e *CommandError) Identity() string { return "MailboxCommandRefused" }

// IsFolderRefused reports whether err is or wraps the server's NO to
// opening a folder (EXAMINE or SELECT, RFC 9051 §6.3.2 and §6.3.3): the
// folder the caller named may have been deleted or renamed since it was
// resolved, or it cannot be opened at all — which only a new listing can
// tell apart. A throttling NO is not a refusal of the folder (AsThrottled).
func IsFolderRefused(err error) bool {
	if _, ok := AsThrottled(err); ok {
		return false
	}
	cmdErr, ok := errors.AsType[*CommandError](err)
	return ok && cmdErr.Status == "NO" && (cmdErr.Command == "EXAMINE" || cmdErr.Command == "SELECT")
}

// TransportError reports that the connection failed during an operation: it
// was dropped or closed, timed out, or the response stream could not be
// parsed. It is transient. The connection is unusable afterwards; Recover
// replaces it.
type TransportError struct {
	Op  string // the command or step, e.g. "UID FETCH", "dial", "TLS handshake"
	Err error  // the cause; its text is not part of Error()
}

func (e *TransportError) Error() string {
	return failure.Text("imapx: "+e.Op+": "+wire.TransportKind(e.Err), e.Identity())
}

func (e *TransportError) Unwrap() error { return e.Err }

// Identity implements failure.Named.
func (e *TransportError) Identity() string { return "MailboxConnectionLost" }

// fromWire turns an error of the reconciliation connection's command layer
// into this package's: its *wire.CommandError and *wire.TransportError
// become *CommandError and *TransportError with the same fields (and so the
// same text and cause). Everything else it returns (the caller's context
// error, wrapped; ErrNoFolder; ErrProtocolViolation, wrapped; a refused
// request) is already what this package returns, and passes unchanged.
//
// An answer that throttles (wire.Throttling) becomes a *ThrottledError
// around the converted error.
func fromWire(err error) error {
	switch e := err.(type) {
	case *wire.CommandError:
		return throttled(e.Throttle, &CommandError{Command: e.Command, Status: e.Status, Code: e.Code})
	case *wire.TransportError:
		return throttled(e.Throttle, &TransportError{Op: e.Op, Err: e.Err})
	}
	return err
}

// TLSError reports a TLS handshake the client refused or the server aborted:
// an untrusted or mismatching certificate, a protocol version or alert, or a
// peer that does not speak TLS. It is terminal.
type TLSError struct {
	Err error
}

func (e *TLSError) Error() string { return failure.Text(e.reason(), e.Identity()) }

// reason is the text without the identity: what the handshake's failure
// was, never the certificate's content.
func (e *TLSError) reason() string {
	var (
		verr *tls.CertificateVerificationError
		uerr x509.UnknownAuthorityError
		herr x509.HostnameError
		cerr x509.CertificateInvalidError
		aerr tls.AlertError
		rerr tls.RecordHeaderError
	)
	switch {
	case errors.As(e.Err, &herr):
		return "imapx: TLS: the server certificate does not match the host name"
	case errors.As(e.Err, &uerr):
		return "imapx: TLS: the server certificate is not signed by a trusted authority"
	case errors.As(e.Err, &cerr):
		return "imapx: TLS: the server certificate is invalid"
	case errors.As(e.Err, &verr):
		return "imapx: TLS: the server certificate could not be verified"
	case errors.As(e.Err, &aerr), isRemoteAlert(e.Err):
		return "imapx: TLS: the handshake was aborted with an alert"
	case errors.As(e.Err, &rerr):
		return "imapx: TLS: the server does not speak TLS"
	case errors.Is(e.Err, errInsecureSkipVerify):
		return errInsecureSkipVerify.Error()
	}
	return "imapx: TLS handshake refused"
}

func (e *TLSError) Unwrap() error { return e.Err }

// Identity implements failure.Named.
func (e *TLSError) Identity() string { return "MailboxTlsRefused" }

var errInsecureSkipVerify = errors.New("imapx: TLS: a configuration that skips certificate verification is refused")

// IsTransient reports whether err is worth retrying on a new connection: a
// dropped, closed or reset connection, end of file, a timeout of the
// session's own CommandTimeout, or a response stream the client could not
// parse (a desynchronized conversation).
//
// It is false for a server that throttles (*ThrottledError, whatever it
// wraps: the server asked not to be asked again now), for terminal
// failures (*AuthenticationError, *AuthenticationExchangeError,
// *CommandError,
// *TLSError, *TokenError, ErrStartTLSUnavailable, ErrLoginDisabled, ErrProtocolViolation,
// ErrFolderListTooLarge, ErrMailboxFolderRecreated, ErrIncompleteAnswer), for
// anything it does not recognize, and for the caller's own context
// cancellation or deadline (context.Canceled, context.DeadlineExceeded): the
// caller owns the context and knows whether it gave up or a pipeline timed an
// attempt out.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	var (
		thrErr  *ThrottledError
		authErr *AuthenticationError
		exchErr *AuthenticationExchangeError
		cmdErr  *CommandError
		tlsErr  *TLSError
		tokErr  *TokenError
		trErr   *TransportError
		imapErr *imap.Error
	)
	switch {
	case errors.As(err, &thrErr):
		return false
	case errors.As(err, &authErr), errors.As(err, &exchErr), errors.As(err, &cmdErr), errors.As(err, &tlsErr), errors.As(err, &tokErr), errors.As(err, &imapErr):
		return false
	case errors.Is(err, ErrMailboxFolderRecreated), errors.Is(err, ErrFolderListTooLarge),
		errors.Is(err, ErrStartTLSUnavailable), errors.Is(err, ErrLoginDisabled),
		errors.Is(err, ErrProtocolViolation), errors.Is(err, ErrNoFolder),
		errors.Is(err, ErrIncompleteAnswer):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return false
	case errors.As(err, &trErr):
		return true
	case failure.ConnectionLost(err):
		return true
	}
	return false
}

// classify turns the error a go-imap command returned into one of this
// package's errors. A NO or BAD is a *CommandError and leaves the connection
// usable; every other error from go-imap means its reader stopped (the
// connection dropped, timed out or desynchronized), so it becomes a
// transient *TransportError. A NO or BAD that throttles is a
// *ThrottledError around the *CommandError.
func classify(command string, err error) (_ error, connectionLost bool) {
	if err == nil {
		return nil, false
	}
	var imapErr *imap.Error
	if errors.As(err, &imapErr) {
		cmd := &CommandError{Command: command, Status: string(imapErr.Type), Code: string(imapErr.Code)}
		return throttled(wire.Throttling(string(imapErr.Type), string(imapErr.Code), imapErr.Text), cmd), false
	}
	return &TransportError{Op: command, Err: err}, true
}

// classify is the package's classify for a command of c: a connection that
// ended after a BYE that throttles (see wire.ByeWatch) is a
// *ThrottledError around a *TransportError with wire.ErrServerBye.
func (c *conn) classify(command string, err error) (_ error, connectionLost bool) {
	classified, lost := classify(command, err)
	if lost {
		if t, ok := c.byeThrottle(); ok {
			return throttled(t, &TransportError{Op: command, Err: wire.ErrServerBye}), true
		}
	}
	return classified, lost
}
