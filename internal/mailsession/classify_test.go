package mailsession_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

func TestClassifyMailbox(t *testing.T) {
	t.Parallel()
	checkFamily(t, resilience.FamilyMailbox, []verdictCase{
		{"rejected credential", &imapx.AuthenticationError{Mechanism: "PLAIN", Code: "AUTHENTICATIONFAILED"}, resilience.Terminal},
		{"wrapped rejected credential", wrapped(&imapx.AuthenticationError{Mechanism: "LOGIN"}), resilience.Terminal},
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
		{"connection reset", wrapped(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), resilience.Transient},
		{"command timeout", &imapx.TransportError{Op: "UID SEARCH", Err: os.ErrDeadlineExceeded}, resilience.Transient},
		{"attempt timeout", resilience.ErrAttemptTimeout, resilience.Transient},
		{"caller deadline", context.DeadlineExceeded, resilience.Terminal},
		{"spent budget over a transient cause", spent{&imapx.TransportError{Op: "UID FETCH", Err: io.EOF}}, resilience.Terminal},
	})
}

// wrapped wraps err the way an adapter adds context.
func wrapped(err error) error { return fmt.Errorf("adapter: %w", err) }

// spent is a translation of a failure that survived its own pipeline:
// whatever the cause says, no outer pipeline repeats it.
type spent struct{ err error }

func (e spent) Error() string     { return "spent: " + e.err.Error() }
func (e spent) Unwrap() error     { return e.err }
func (e spent) BudgetSpent() bool { return true }

// checkFamily asserts the verdict of every case for every class of the
// family, through the registry every outbound call runs under.
func checkFamily(t *testing.T, family resilience.Family, cases []verdictCase) {
	t.Helper()
	reg, err := outbound.NewRegistry(nil, nil, nil)
	require.NoError(t, err)
	var classes []resilience.DependencyClass
	for _, c := range resilience.Classes() {
		if c.Family() == family {
			classes = append(classes, c)
		}
	}
	require.NotEmpty(t, classes)
	cases = append(cases,
		verdictCase{"caller cancellation", context.Canceled, resilience.Canceled},
		verdictCase{"unrecognized", errors.New("SENTINEL"), resilience.Terminal},
		verdictCase{"nested pipeline rejection", &resilience.DependencyUnavailableError{Class: resilience.MailboxSessionEstablishment, Instance: "a", Rejection: resilience.RejectionCircuitOpen}, resilience.Terminal},
	)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, class := range classes {
				require.Equal(t, tc.want, reg.Classify(class, tc.err), "%s: %T", class, tc.err)
			}
		})
	}
}

type verdictCase struct {
	name string
	err  error
	want resilience.Verdict
}
