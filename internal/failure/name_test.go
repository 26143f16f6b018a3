package failure_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// sameText wraps an error and says nothing of its own.
type sameText struct{ err error }

func (e *sameText) Error() string { return e.err.Error() }
func (e *sameText) Unwrap() error { return e.err }

type declares struct{ later, spent, conflict, unavailable bool }

func (d declares) Error() string               { return "declares" }
func (d declares) RetryLater() bool            { return d.later }
func (d declares) BudgetSpent() bool           { return d.spent }
func (d declares) ConcurrencyConflict() bool   { return d.conflict }
func (d declares) DependencyUnavailable() bool { return d.unavailable }

const registeredName = "RegisteredByAnAdapter"

var errRegistered = errors.New("a library's failure that carries no identity")

func init() {
	failure.NameBy(func(err error) string {
		if errors.Is(err, errRegistered) {
			return registeredName
		}
		return ""
	})
}

// TestName: a failure's name is its identity however deeply it is wrapped,
// then what an adapter's namer says, then Timeout for a deadline, then the
// Go type of the first error that says more than its cause — never
// *fmt.wrapError, never the text.
func TestName(t *testing.T) {
	t.Parallel()
	op := &net.OpError{Op: "read", Err: syscall.ECONNRESET}
	for _, tc := range []struct {
		name string
		err  error
		want string
	}{
		{"nil", nil, ""},
		{"identity", refused{}, "Refused"},
		{"wrapped identity", fmt.Errorf("a: %w", fmt.Errorf("b: %w", refused{})), "Refused"},
		{"identity inside a multi-%w", fmt.Errorf("a: %w, %w", io.EOF, refused{}), "Refused"},
		{"joined identity", errors.Join(errors.New("plain"), refused{}), "Refused"},
		{"sentinel", failure.New("Sentinel", "x"), "Sentinel"},
		{"registered namer", fmt.Errorf("store: %w", errRegistered), registeredName},
		{"deadline", fmt.Errorf("call: %w", context.DeadlineExceeded), "Timeout"},
		{"a type behind fmt.Errorf", fmt.Errorf("read: %w", op), "*net.OpError"},
		{"a type behind a wrapper with its text", &sameText{fmt.Errorf("read: %w", op)}, "*net.OpError"},
		{"the first that says more", fmt.Errorf("x: %w", &os.PathError{Op: "open", Path: "secret", Err: os.ErrNotExist}), "*fs.PathError"},
		{"plain", fmt.Errorf("context: %w", errors.New("the text is not the name")), "*errors.errorString"},
		{"joined plain", errors.Join(io.EOF, op), "*errors.errorString"},
	} {
		got := failure.Name(tc.err)
		require.Equal(t, tc.want, got, tc.name)
		require.NotEqual(t, "*fmt.wrapError", got, tc.name)
		require.NotContains(t, got, "secret", tc.name)
	}
}

// TestBehaviour: each behaviour is found anywhere in the chain and answers
// what the failure declares; a failure that declares nothing has none.
func TestBehaviour(t *testing.T) {
	t.Parallel()
	all := fmt.Errorf("wrapped: %w", declares{later: true, spent: true, conflict: true, unavailable: true})
	later, declared := failure.WorthRetryingLater(all)
	require.True(t, later)
	require.True(t, declared)
	require.True(t, failure.IsBudgetSpent(all))
	require.True(t, failure.IsConcurrencyConflict(all))
	require.True(t, failure.IsDependencyUnavailable(all))

	none := fmt.Errorf("wrapped: %w", declares{})
	later, declared = failure.WorthRetryingLater(none)
	require.False(t, later)
	require.True(t, declared, "a failure may declare that it is not worth retrying")
	require.False(t, failure.IsBudgetSpent(none))
	require.False(t, failure.IsConcurrencyConflict(none))
	require.False(t, failure.IsDependencyUnavailable(none))

	_, declared = failure.WorthRetryingLater(errors.New("plain"))
	require.False(t, declared)
}

// TestConnectionLoss: every way a connection goes away is one kind, and a
// failure that is not about the connection is none.
func TestConnectionLoss(t *testing.T) {
	t.Parallel()
	for err, want := range map[error]string{
		fmt.Errorf("w: %w", os.ErrDeadlineExceeded):                       "timed out",
		&net.OpError{Op: "dial", Err: syscall.ECONNREFUSED}:               "connection refused",
		&net.OpError{Op: "read", Err: syscall.ECONNRESET}:                 "connection reset",
		fmt.Errorf("w: %w", syscall.EPIPE):                                "connection reset",
		io.EOF:                                                            "connection closed",
		fmt.Errorf("w: %w", io.ErrUnexpectedEOF):                          "connection closed",
		net.ErrClosed:                                                     "connection closed",
		&net.DNSError{IsTimeout: true}:                                    "timed out",
		&net.OpError{Op: "read", Err: errors.New("some network failure")}: "network error",
		errors.New("a refused command"):                                   "",
		context.Canceled:                                                  "",
	} {
		require.Equal(t, want, failure.ConnectionLoss(err), "%v", err)
		require.Equal(t, want != "", failure.ConnectionLost(err), "%v", err)
	}
}
