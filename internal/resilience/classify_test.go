package resilience_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/resilience"
)

type verdictCase struct {
	name string
	err  error
	want resilience.Verdict
}

// checkTable asserts the verdict of every case for every class of the
// family, through a registry's Classify.
func checkTable(t *testing.T, family resilience.Family, cases []verdictCase) {
	t.Helper()
	reg, err := resilience.NewRegistry(resilience.Options{Classifiers: testClassifiers()})
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
				require.Equal(t, tc.want, reg.Classify(class, tc.err), "%s: %T", class, tc.err)
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
	{"spent budget over a transient cause", spent{&transportFailure{op: "UID FETCH", err: io.EOF}}, resilience.Terminal},
}

// spent is an adapter's translation of a failure that survived its own
// pipeline: whatever the cause says, no outer pipeline repeats it.
type spent struct{ err error }

func (e spent) Error() string     { return "spent: " + e.err.Error() }
func (e spent) Unwrap() error     { return e.err }
func (e spent) BudgetSpent() bool { return true }

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

func TestVerdictNames(t *testing.T) {
	t.Parallel()
	require.Equal(t, "transient", resilience.Transient.String())
	require.Equal(t, "terminal", resilience.Terminal.String())
	require.Equal(t, "canceled", resilience.Canceled.String())
}

func TestClassifyUndeclaredClass(t *testing.T) {
	t.Parallel()
	reg, err := resilience.NewRegistry(resilience.Options{Classifiers: testClassifiers()})
	require.NoError(t, err)
	require.Equal(t, resilience.Terminal, reg.Classify("Bogus", droppedConnection))
	require.Equal(t, resilience.Canceled, reg.Classify("Bogus", context.Canceled))
}
