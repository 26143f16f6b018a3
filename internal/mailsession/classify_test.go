package mailsession_test

import (
	"context"
	"crypto/x509"
	"errors"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/emersion/go-imap/v2"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/testharness/verdicts"
)

func TestClassifyMailbox(t *testing.T) {
	t.Parallel()
	verdicts.Check(t, resilience.FamilyMailbox, []verdicts.Case{
		{"rejected credential", &imapx.AuthenticationError{Mechanism: "PLAIN", Code: "AUTHENTICATIONFAILED"}, resilience.Terminal},
		{"wrapped rejected credential", verdicts.Wrapped(&imapx.AuthenticationError{Mechanism: "LOGIN"}), resilience.Terminal},
		{"unusable TLS", &imapx.TLSError{Err: x509.UnknownAuthorityError{}}, resilience.Terminal},
		{"mechanism unavailable", imapx.ErrLoginDisabled, resilience.Terminal},
		{"STARTTLS unavailable", imapx.ErrStartTLSUnavailable, resilience.Terminal},
		{"refused command", &imapx.CommandError{Command: "EXAMINE", Status: "NO", Code: "NONEXISTENT"}, resilience.Terminal},
		{"go-imap NO", &imap.Error{Type: imap.StatusResponseTypeNo, Text: "SENTINEL"}, resilience.Terminal},
		{"protocol violation", imapx.ErrProtocolViolation, resilience.Terminal},
		{"folder recreated", imapx.ErrMailboxFolderRecreated, resilience.Terminal},
		{"dropped connection", &imapx.TransportError{Op: "UID FETCH", Err: io.ErrUnexpectedEOF}, resilience.Transient},
		{"server disconnect", &imapx.TransportError{Op: "UID FETCH", Err: io.EOF}, resilience.Transient},
		{"desynchronized stream", &imapx.TransportError{Op: "UID FETCH", Err: errors.New("in response: cannot parse")}, resilience.Transient},
		{"connection reset", verdicts.Wrapped(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), resilience.Transient},
		{"command timeout", &imapx.TransportError{Op: "UID SEARCH", Err: os.ErrDeadlineExceeded}, resilience.Transient},
		{"attempt timeout", resilience.ErrAttemptTimeout, resilience.Transient},
		{"caller deadline", context.DeadlineExceeded, resilience.Terminal},
		{"spent budget over a transient cause", verdicts.Spent(&imapx.TransportError{Op: "UID FETCH", Err: io.EOF}), resilience.Terminal},
	})
}
