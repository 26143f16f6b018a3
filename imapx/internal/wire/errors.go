package wire

import (
	"errors"
	"os"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// The sentinel errors of this file are the adapter's own: package imapx
// exports each of them as the same variable, so a caller's errors.Is sees
// one identity whichever layer returned the error, and that is why their
// texts say "imapx". The two error types are this package's: imapx turns
// each into its own type of the same name and fields at its boundary,
// because the Go type of an error is part of what MailFathom reports about
// a failure.
//
// Error texts name the command, the status and the response code only: a
// server's response text, a folder path, a user name or anything taken from
// a message never appears in one, because any of them can carry personal
// data and errors end up in logs.

// ErrMalformedResponse is the cause of a *TransportError when the response
// stream of a Conn could not be parsed, or exceeded a bound (line, literal,
// nesting, count): the conversation can no longer be trusted, so the
// connection is closed. It is transient, like every *TransportError.
var ErrMalformedResponse = failure.New("MailboxResponseMalformed", "imapx: malformed or oversized server response")

// ErrProtocolViolation marks a server answer that parsed but cannot be
// right, such as an EXAMINE without UIDVALIDITY. It is terminal: repeating
// the request gets the same answer.
var ErrProtocolViolation = failure.New("MailboxProtocolViolation", "imapx: server response violates the protocol")

// ErrNoFolder is returned by a command that needs a folder open when none
// is.
var ErrNoFolder = failure.New("MailboxNoFolderOpen", "imapx: no folder is open")

// The causes a *TransportError names by kind (see TransportKind).
var (
	// ErrConnectionUnusable: the connection was killed by an earlier
	// failure and takes no further command.
	ErrConnectionUnusable = errors.New("connection unusable")
	// ErrNotConnected: there is no connection at all.
	ErrNotConnected = errors.New("not connected")
	// ErrServerBye: the server ended the conversation with BYE.
	ErrServerBye = errors.New("server greeted with BYE")
	// ErrConnectionEnded: the connection's reader had already seen it end
	// — the server closed it, with or without a BYE, or the network reset
	// it — before a command was written.
	ErrConnectionEnded = errors.New("connection ended")
)

// CommandError reports that the server answered a command with NO or BAD. It
// is terminal; the connection stays usable.
type CommandError struct {
	Command string // e.g. "EXAMINE", "UID FETCH"
	Status  string // "NO" or "BAD"
	Code    string // response code, e.g. "NONEXISTENT"; may be empty
	// Throttle is what the answer said about asking again later; zero
	// when it does not throttle (see Throttling).
	Throttle Throttle
}

func (e *CommandError) Error() string {
	s := "imapx: " + e.Command + " answered " + e.Status
	if e.Code != "" {
		s += " [" + e.Code + "]"
	}
	return s
}

// TransportError reports that the connection failed during a command: it
// was dropped or closed, timed out, or the response stream could not be
// parsed. It is transient. The connection is unusable afterwards.
type TransportError struct {
	Op  string // the command, e.g. "UID FETCH"
	Err error  // the cause; its text is not part of Error()
	// Throttle is what the server's BYE said about asking again later;
	// zero when it said nothing of it (see Throttling).
	Throttle Throttle
}

func (e *TransportError) Error() string {
	return "imapx: " + e.Op + ": " + TransportKind(e.Err)
}

func (e *TransportError) Unwrap() error { return e.Err }

// TransportKind describes the cause of a transport failure, on any of the
// adapter's connections, without its text, which can quote server bytes
// (go-imap's parse errors do).
func TransportKind(err error) string {
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		return "timed out"
	case errors.Is(err, ErrConnectionUnusable):
		return "connection unusable after an earlier failure; Recover replaces it"
	case errors.Is(err, ErrNotConnected):
		return "not connected"
	case errors.Is(err, ErrConnectionEnded):
		return "connection already closed by the server or the network"
	case failure.ConnectionLost(err):
		return failure.ConnectionLoss(err)
	case errors.Is(err, ErrServerBye):
		return "server refused the session (BYE)"
	case errors.Is(err, ErrMalformedResponse):
		return "malformed or oversized response"
	default:
		return "connection lost or response stream unreadable"
	}
}
