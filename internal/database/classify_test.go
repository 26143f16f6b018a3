package database_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgproto3"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/testharness/verdicts"
)

func TestClassifyDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)

	// Real pgx errors: a refused connection, a password the server
	// refuses, a query the server never answers, and a query on a closed
	// connection.
	refused := connectErr(ctx, t, closedAddress(t))
	authRefused := connectErr(ctx, t, fakePostgres(t, func(be *pgproto3.Backend) {
		be.Send(&pgproto3.ErrorResponse{Severity: "FATAL", Code: "28P01", Message: "SENTINEL"})
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

	verdicts.Check(t, resilience.FamilyDatabase, []verdicts.Case{
		{"serialization failure", &pgconn.PgError{Code: "40001", Message: "SENTINEL"}, resilience.Transient},
		{"deadlock", verdicts.Wrapped(&pgconn.PgError{Code: "40P01"}), resilience.Transient},
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
		{"concurrency conflict with reason", verdicts.Wrapped(&mailstore.ConcurrencyConflictError{Reason: "checkpoint moved"}), resilience.Terminal},
		{"conflict constraint", &pgconn.PgError{Code: "23505", ConstraintName: "synchronization_checkpoints_pkey"}, resilience.Terminal},
		{"concurrency conflict that was a serialization failure", errors.Join(mailstore.ErrConcurrencyConflict, &pgconn.PgError{Code: "40001"}), resilience.Terminal},
		{"bare network error", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, resilience.Terminal},
		{"bare EOF", io.ErrUnexpectedEOF, resilience.Terminal},
		{"spent budget over a transient cause", verdicts.Spent(&pgconn.PgError{Code: "40001"}), resilience.Terminal},
	})
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

func TestConnectionLost(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)

	// Real pgx failures: a refused connection, a query on a closed
	// connection, and a server that drops the connection under a query.
	refused := connectErr(ctx, t, closedAddress(t))
	closed := connect(ctx, t, fakePostgres(t, ready))
	require.NoError(t, closed.Close(ctx))
	_, onClosed := closed.Exec(ctx, "SELECT 1").ReadAll()
	dropping := connect(ctx, t, fakePostgres(t, func(be *pgproto3.Backend) {
		ready(be)
		_ = be.Flush()
		_, _ = be.Receive()
		runtime.Goexit() // the query arrived: close the connection under it
	}))
	_, dropped := dropping.Exec(ctx, "SELECT 1").ReadAll()
	require.Error(t, dropped)

	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"connection refused", refused, true},
		{"query on a closed connection", onClosed, true},
		{"connection dropped under a query", verdicts.Wrapped(dropped), true},
		{"server shutting down", &pgconn.PgError{Code: "57P01"}, true},
		{"connection exception", &pgconn.PgError{Code: "08006"}, true},
		{"too many connections", &pgconn.PgError{Code: "53300"}, true},
		{"closed by pgx", verdicts.Wrapped(pgconn.ErrConnClosed), true},
		{"a constraint", &pgconn.PgError{Code: "23514"}, false},
		{"a mail server's TLS refusal", verdicts.Wrapped(&net.OpError{Op: "remote error", Net: "tcp", Err: tls.AlertError(42)}), false},
		{"a bare network error", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, false},
		{"a bare EOF", io.EOF, false},
		{"nil", nil, false},
	} {
		require.Equal(t, tc.want, database.ConnectionLost(tc.err), "%s: %v", tc.name, tc.err)
	}
}
