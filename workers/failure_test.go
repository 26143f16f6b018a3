package workers_test

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/workers"
)

// TestClassifyFailure is the job failure classifier's table: what River
// does with each failure a work unit can end with, and the identity River
// UI shows for it.
func TestClassifyFailure(t *testing.T) {
	t.Parallel()
	unavailable := &resilience.DependencyUnavailableError{Class: resilience.MailboxSessionEstablishment, Instance: "a", Rejection: resilience.RejectionCircuitOpen}
	tokenErr := func(status int) error {
		return &imapx.TokenError{Err: &mailoauth.Error{Account: "a", Step: mailoauth.StepExchange, Err: &mailoauth.TokenEndpointError{Status: status}}}
	}
	cases := []struct {
		name     string
		err      error
		want     workers.Disposition
		identity string
	}{
		{"mailbox unavailable", &mailsession.MailboxUnavailableError{Account: "a", Operation: "inbox", Err: &imapx.TransportError{Op: "UID FETCH", Err: io.EOF}}, workers.Retry, "MailboxUnavailable"},
		{"pipeline rejection", fmt.Errorf("wrapped: %w", unavailable), workers.Retry, "DependencyUnavailable"},
		{"rejected credential", &imapx.AuthenticationError{Mechanism: "PLAIN"}, workers.Cancel, "MailAuthenticationRejected"},
		{"credential refused inside the exchange", &imapx.AuthenticationError{Mechanism: "SCRAM-SHA-256", Code: "invalid-proof"}, workers.Cancel, "MailAuthenticationRejected"},
		{"exchange the client broke off", &imapx.AuthenticationExchangeError{Mechanism: "SCRAM-SHA-256", Err: &sasl.IterationCountError{Count: 1, Min: 4096, Max: 1_000_000}}, workers.Cancel, "MailAuthenticationExchangeRefused"},
		{"refused certificate", &imapx.TLSError{Err: errors.New("x509")}, workers.Cancel, "MailboxTlsRefused"},
		{"refused command", &imapx.CommandError{Command: "EXAMINE", Status: "NO"}, workers.Cancel, "MailboxCommandRefused"},
		{"policy violation", &imapx.PolicyViolationError{Rule: "UnencryptedConnectionRequiresExplicitOptIn"}, workers.Cancel, "UnencryptedConnectionRequiresExplicitOptIn"},
		{"folder recreated", imapx.ErrMailboxFolderRecreated, workers.Retry, "MailboxFolderRecreated"},
		{"incomplete answer", imapx.ErrIncompleteAnswer, workers.Cancel, "MailboxAnswerIncomplete"},
		{"authorization server overloaded", tokenErr(503), workers.Retry, "MailAuthorizationServerUnavailable"},
		{"grant refused", tokenErr(401), workers.Cancel, "MailAccessTokenUnavailable"},
		{"persistence conflict", fmt.Errorf("commit: %w", mailstore.ErrConcurrencyConflict), workers.Defer, "PersistenceConcurrencyConflict"},
		{"database shutting down", &pgconn.PgError{Code: "57P01"}, workers.Retry, "Database57P01"},
		{"database connection lost", fmt.Errorf("mailstore: write: %w", pgconn.ErrConnClosed), workers.Retry, "DatabaseConnectionLost"},
		{"database unreachable", &pgconn.ConnectError{}, workers.Retry, "DatabaseConnectionLost"},
		{"a network error that is not the database's", &net.OpError{Op: "read", Err: errors.New("reset")}, workers.Cancel, "*net.OpError"},
		{"a refused TLS handshake", &net.OpError{Op: "remote error", Net: "tcp", Err: tls.AlertError(42)}, workers.Cancel, "*net.OpError"},
		{"database constraint", &pgconn.PgError{Code: "23514"}, workers.Cancel, "Database23514"},
		{"deadlock", &pgconn.PgError{Code: "40P01"}, workers.Retry, "Database40P01"},
		{"unrecognized", errors.New("something else"), workers.Cancel, "*errors.errorString"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, workers.ClassifyFailure(tc.err), "%v", tc.err)
			require.Equal(t, tc.identity, failure.Name(tc.err))
		})
	}
}
