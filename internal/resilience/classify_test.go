package resilience_test

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/textproto"
	"net/url"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

type verdictCase struct {
	name string
	err  error
	want resilience.Verdict
}

// checkTable asserts the verdict of every case for every class of the
// family, through Classify, the family classifier and a registry.
func checkTable(t *testing.T, family resilience.Family, cases []verdictCase) {
	t.Helper()
	reg, err := resilience.NewRegistry(nil, nil, nil, nil)
	require.NoError(t, err)
	var classes []resilience.DependencyClass
	for _, c := range resilience.Classes() {
		if c.Family() == family {
			classes = append(classes, c)
		}
	}
	require.NotEmpty(t, classes)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, class := range classes {
				require.Equal(t, tc.want, resilience.Classify(class, tc.err), "%s: %T", class, tc.err)
				require.Equal(t, tc.want, reg.Classify(class, tc.err), "%s: %T", class, tc.err)
				require.Equal(t, tc.want == resilience.Transient, resilience.FamilyClassifier(family).Transient(tc.err), "%s: %T", class, tc.err)
			}
		})
	}
}

// wrapped wraps err the way an adapter adds context.
func wrapped(err error) error { return fmt.Errorf("adapter: %w", err) }

// unavailable is a nested pipeline's rejection.
var unavailable = &resilience.DependencyUnavailableError{Class: resilience.MailboxSessionEstablishment, Instance: "a", Rejection: resilience.RejectionCircuitOpen}

// Cases every family shares: cancellation is never transient, and what is
// unrecognized is terminal.
var commonCases = []verdictCase{
	{"caller cancellation", context.Canceled, resilience.Canceled},
	{"wrapped caller cancellation", wrapped(context.Canceled), resilience.Canceled},
	{"unrecognized", errors.New(sentinel), resilience.Terminal},
	{"nil", nil, resilience.Terminal},
	{"nested pipeline rejection", unavailable, resilience.Terminal},
	{"single-layer refusal", resilience.ErrNestedSameClass, resilience.Terminal},
	{"spent budget over a transient cause", spent{&imapx.TransportError{Op: "UID FETCH", Err: io.EOF}}, resilience.Terminal},
}

// spent is an adapter's translation of a failure that survived its own
// pipeline: whatever the cause says, no outer pipeline repeats it.
type spent struct{ err error }

func (e spent) Error() string     { return "spent: " + e.err.Error() }
func (e spent) Unwrap() error     { return e.err }
func (e spent) BudgetSpent() bool { return true }

func TestClassifyMailbox(t *testing.T) {
	t.Parallel()
	checkTable(t, resilience.FamilyMailbox, append([]verdictCase{
		{"rejected credential", &imapx.AuthenticationError{Mechanism: "PLAIN", Code: "AUTHENTICATIONFAILED"}, resilience.Terminal},
		{"wrapped rejected credential", wrapped(&imapx.AuthenticationError{Mechanism: "LOGIN"}), resilience.Terminal},
		{"unusable TLS", &imapx.TLSError{Err: x509.UnknownAuthorityError{}}, resilience.Terminal},
		{"mechanism unavailable", imapx.ErrLoginDisabled, resilience.Terminal},
		{"STARTTLS unavailable", imapx.ErrStartTLSUnavailable, resilience.Terminal},
		{"refused command", &imapx.CommandError{Command: "EXAMINE", Status: "NO", Code: "NONEXISTENT"}, resilience.Terminal},
		{"go-imap NO", &imap.Error{Type: imap.StatusResponseTypeNo, Text: sentinel}, resilience.Terminal},
		{"protocol violation", imapx.ErrProtocolViolation, resilience.Terminal},
		{"folder recreated", imapx.ErrMailboxFolderRecreated, resilience.Terminal},
		{"dropped connection", &imapx.TransportError{Op: "UID FETCH", Err: io.ErrUnexpectedEOF}, resilience.Transient},
		{"server disconnect", &imapx.TransportError{Op: "UID FETCH", Err: io.EOF}, resilience.Transient},
		{"desynchronized stream", &imapx.TransportError{Op: "UID FETCH", Err: errors.New("in response: cannot parse")}, resilience.Transient},
		{"connection reset", wrapped(&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}), resilience.Transient},
		{"command timeout", &imapx.TransportError{Op: "UID SEARCH", Err: os.ErrDeadlineExceeded}, resilience.Transient},
		{"attempt timeout", resilience.ErrAttemptTimeout, resilience.Transient},
		{"caller deadline", context.DeadlineExceeded, resilience.Terminal},
	}, commonCases...))
}

// smtpReply is an SMTP client error that declares its reply code.
type smtpReply struct{ code int }

func (e smtpReply) Error() string { return fmt.Sprintf("%d %s", e.code, sentinel) }
func (e smtpReply) SMTPCode() int { return e.code }

func TestClassifyDelivery(t *testing.T) {
	t.Parallel()
	checkTable(t, resilience.FamilyDelivery, append([]verdictCase{
		{"421 service not available", &textproto.Error{Code: 421, Msg: sentinel}, resilience.Transient},
		{"450 mailbox busy", &textproto.Error{Code: 450}, resilience.Transient},
		{"451 local error", wrapped(&textproto.Error{Code: 451}), resilience.Transient},
		{"452 insufficient storage", &textproto.Error{Code: 452}, resilience.Transient},
		{"499 upper bound", &textproto.Error{Code: 499}, resilience.Transient},
		{"500 syntax", &textproto.Error{Code: 500}, resilience.Terminal},
		{"550 rejected recipient", &textproto.Error{Code: 550, Msg: sentinel}, resilience.Terminal},
		{"554 transaction failed", &textproto.Error{Code: 554}, resilience.Terminal},
		{"354 is not a failure to repeat", &textproto.Error{Code: 354}, resilience.Terminal},
		{"SMTPCode 421", smtpReply{421}, resilience.Transient},
		{"wrapped SMTPCode 451", wrapped(smtpReply{451}), resilience.Transient},
		{"SMTPCode 530", smtpReply{530}, resilience.Terminal},
		{"connection lost before the reply", io.ErrUnexpectedEOF, resilience.Terminal},
		{"network failure", &net.OpError{Op: "write", Net: "tcp", Err: syscall.EPIPE}, resilience.Terminal},
		{"attempt timeout", resilience.ErrAttemptTimeout, resilience.Terminal},
		{"transport failure from imapx", droppedConnection, resilience.Terminal},
	}, commonCases...))
}

func TestClassifyDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)

	// Real pgx errors: a refused connection, a password the server
	// refuses, a query the server never answers, and a query on a closed
	// connection.
	refused := connectErr(ctx, t, closedAddress(t))
	authRefused := connectErr(ctx, t, fakePostgres(t, func(be *pgproto3.Backend) {
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: sentinel})
	}))
	startingUp := connectErr(ctx, t, fakePostgres(t, func(be *pgproto3.Backend) {
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "57P03", Message: "the database system is starting up"})
	}))
	silent := connect(ctx, t, fakePostgres(t, ready))
	qctx, qcancel := context.WithTimeout(ctx, 50*time.Millisecond)
	_, timedOut := silent.Exec(qctx, "SELECT 1").ReadAll()
	qcancel()
	closed := connect(ctx, t, fakePostgres(t, ready))
	require.NoError(t, closed.Close(ctx))
	_, onClosed := closed.Exec(ctx, "SELECT 1").ReadAll()

	require.IsType(t, &pgconn.ConnectError{}, refused)
	require.True(t, pgconn.Timeout(timedOut), "%v", timedOut)
	require.False(t, errors.Is(timedOut, context.Canceled))
	require.True(t, pgconn.SafeToRetry(onClosed), "%v", onClosed)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, authRefused, &pgErr)
	require.Equal(t, "28P01", pgErr.Code)

	checkTable(t, resilience.FamilyDatabase, append([]verdictCase{
		{"serialization failure", &pgconn.PgError{Code: "40001", Message: sentinel}, resilience.Transient},
		{"deadlock", wrapped(&pgconn.PgError{Code: "40P01"}), resilience.Transient},
		{"unique violation", &pgconn.PgError{Code: "23505", ConstraintName: "some_other_key"}, resilience.Terminal},
		{"undefined table", &pgconn.PgError{Code: "42P01"}, resilience.Terminal},
		{"statement cancelled", &pgconn.PgError{Code: "57014"}, resilience.Terminal},
		{"other 40xxx", &pgconn.PgError{Code: "40002"}, resilience.Terminal},
		{"connection refused", refused, resilience.Transient},
		{"server starting up", startingUp, resilience.Transient},
		{"password refused", authRefused, resilience.Terminal},
		{"query timeout", timedOut, resilience.Transient},
		{"safe to retry", onClosed, resilience.Transient},
		{"attempt timeout", resilience.ErrAttemptTimeout, resilience.Transient},
		{"concurrency conflict", mailstore.ErrConcurrencyConflict, resilience.Terminal},
		{"concurrency conflict with reason", wrapped(&mailstore.ConcurrencyConflictError{Reason: "checkpoint moved"}), resilience.Terminal},
		{"conflict constraint", &pgconn.PgError{Code: "23505", ConstraintName: "synchronization_checkpoints_pkey"}, resilience.Terminal},
		{"concurrency conflict that was a serialization failure", errors.Join(mailstore.ErrConcurrencyConflict, &pgconn.PgError{Code: "40001"}), resilience.Terminal},
		{"bare network error", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, resilience.Terminal},
		{"bare EOF", io.ErrUnexpectedEOF, resilience.Terminal},
	}, commonCases...))
}

// httpStatus is a provider error carrying the status it answered with.
type httpStatus int

func (e httpStatus) Error() string   { return fmt.Sprintf("status %d: %s", int(e), sentinel) }
func (e httpStatus) HTTPStatus() int { return int(e) }

func TestClassifyProvider(t *testing.T) {
	t.Parallel()
	var syntax *json.SyntaxError
	require.Error(t, json.Unmarshal([]byte("{"), &struct{}{}))
	syntaxErr := json.Unmarshal([]byte("{"), &struct{}{})
	require.ErrorAs(t, syntaxErr, &syntax)

	checkTable(t, resilience.FamilyProvider, append([]verdictCase{
		{"408", httpStatus(408), resilience.Transient},
		{"429", wrapped(httpStatus(429)), resilience.Transient},
		{"500", httpStatus(500), resilience.Transient},
		{"502", httpStatus(502), resilience.Transient},
		{"503", httpStatus(503), resilience.Transient},
		{"599", httpStatus(599), resilience.Transient},
		{"400", httpStatus(400), resilience.Terminal},
		{"401 refused credential", httpStatus(401), resilience.Terminal},
		{"403", httpStatus(403), resilience.Terminal},
		{"404", httpStatus(404), resilience.Terminal},
		{"409", httpStatus(409), resilience.Terminal},
		{"422 rejected request", httpStatus(422), resilience.Terminal},
		{"200 with a wrong shape", httpStatus(200), resilience.Terminal},
		{"no response: refused", &url.Error{Op: "Post", URL: "https://provider.example", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}, resilience.Transient},
		{"no response: reset", wrapped(syscall.ECONNRESET), resilience.Transient},
		{"no response: cut short", io.ErrUnexpectedEOF, resilience.Transient},
		{"no response: attempt timeout", resilience.ErrAttemptTimeout, resilience.Transient},
		{"answer of the wrong shape", syntaxErr, resilience.Terminal},
	}, commonCases...))
}

func TestClassifyUndeclaredClass(t *testing.T) {
	t.Parallel()
	require.Equal(t, resilience.Terminal, resilience.Classify("Bogus", droppedConnection))
	require.Equal(t, resilience.Canceled, resilience.Classify("Bogus", context.Canceled))
	require.Nil(t, resilience.FamilyClassifier(""))
	require.Equal(t, "transient", resilience.Transient.String())
	require.Equal(t, "terminal", resilience.Terminal.String())
	require.Equal(t, "canceled", resilience.Canceled.String())
}

// closedAddress returns a loopback address nothing listens on.
func closedAddress(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	return addr
}

// ready completes a startup: authentication accepted, ready for queries.
// The server then reads and never answers.
func ready(be *pgproto3.Backend) {
	be.Send(&pgproto3.AuthenticationOk{})
	be.Send(&pgproto3.BackendKeyData{ProcessID: 1, SecretKey: []byte{0, 0, 0, 1}})
	be.Send(&pgproto3.ReadyForQuery{TxStatus: 'I'})
}

// fakePostgres serves one scripted startup per connection on loopback and
// returns its address.
func fakePostgres(t *testing.T, script func(be *pgproto3.Backend)) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				be := pgproto3.NewBackend(c, c)
				if _, err := be.ReceiveStartupMessage(); err != nil {
					return
				}
				script(be)
				if err := be.Flush(); err != nil {
					return
				}
				_, _ = io.Copy(io.Discard, c)
			}()
		}
	}()
	return l.Addr().String()
}

func connString(addr string) string {
	return "postgres://mailfathom@" + addr + "/mailfathom?sslmode=disable&connect_timeout=5"
}

func connect(ctx context.Context, t *testing.T, addr string) *pgconn.PgConn {
	t.Helper()
	c, err := pgconn.Connect(ctx, connString(addr))
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func connectErr(ctx context.Context, t *testing.T, addr string) error {
	t.Helper()
	c, err := pgconn.Connect(ctx, connString(addr))
	if c != nil {
		_ = c.Close(ctx)
	}
	require.Error(t, err)
	return err
}
