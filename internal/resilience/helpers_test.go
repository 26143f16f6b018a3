package resilience_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
)

// sentinel appears in the text of every failure the tests produce and in
// nothing else: no log line and no metric may contain it.
const sentinel = "SENTINEL-jane.doe@example.test-said-550-go-away"

// fastBudget is a budget with small durations whose circuit breaker needs
// far more attempts than a test makes; tests change what they exercise.
func fastBudget(change func(b *resilience.Budget)) resilience.Budget {
	b := resilience.Budget{
		MaxAttempts:                     3,
		BaseDelay:                       time.Millisecond,
		MaxDelay:                        2 * time.Millisecond,
		AttemptTimeout:                  5 * time.Second,
		TotalTimeout:                    10 * time.Second,
		CircuitBreakerFailureRatio:      0.5,
		CircuitBreakerMinimumThroughput: 1000,
		CircuitBreakerSamplingDuration:  10 * time.Second,
		CircuitBreakerBreakDuration:     10 * time.Second,
		ConcurrencyLimit:                10,
	}
	if change != nil {
		change(&b)
	}
	return b
}

type testBundle struct {
	registry *resilience.Registry
	metrics  *prometheus.Registry
	logs     *capture.Buffer
}

// setup builds a registry whose classes all have budget (one per class
// where budgets names it), judging failures by testClassifiers (with the
// families classifiers names replaced), logging at debug level into a
// buffer and registering on a fresh pedantic registry.
func setup(t *testing.T, budget resilience.Budget, budgets map[resilience.DependencyClass]resilience.Budget, classifiers map[resilience.Family]resilience.Classifier) (context.Context, *testBundle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)

	all := map[resilience.DependencyClass]resilience.Budget{}
	for _, class := range resilience.Classes() {
		all[class] = budget
	}
	for class, b := range budgets {
		all[class] = b
	}
	logs := &capture.Buffer{}
	metrics := prometheus.NewPedanticRegistry()
	families := testClassifiers()
	for f, c := range classifiers {
		families[f] = c
	}
	reg, err := resilience.NewRegistry(resilience.Options{
		Budgets:     all,
		Classifiers: families,
		Logger:      slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
		Registerer:  metrics,
	})
	require.NoError(t, err)
	t.Cleanup(func() {
		require.NotContains(t, logs.String(), sentinel, "a log line carries failure text")
		require.NotContains(t, logs.String(), "jane.doe", "a log line carries an address")
	})
	return ctx, &testBundle{registry: reg, metrics: metrics, logs: logs}
}

// testClassifiers stand in for the adapters' classifiers, which this
// package does not know: a *transportFailure, a network error and an
// abandoned attempt are transient in every family; everything else is
// terminal.
func testClassifiers() map[resilience.Family]resilience.Classifier {
	transient := resilience.ClassifierFunc(func(err error) bool {
		var ne net.Error
		_, lost := errors.AsType[*transportFailure](err)
		return lost || errors.As(err, &ne) || errors.Is(err, resilience.ErrAttemptTimeout)
	})
	return map[resilience.Family]resilience.Classifier{
		resilience.FamilyMailbox:  transient,
		resilience.FamilyDatabase: transient,
	}
}

// transportFailure is an adapter's dropped connection: op names the command.
type transportFailure struct {
	op  string
	err error
}

func (e *transportFailure) Error() string { return "adapter: " + e.op + ": " + e.err.Error() }
func (e *transportFailure) Unwrap() error { return e.err }

// rejection is an adapter's refusal nothing repeats, such as a rejected
// credential.
type rejection struct{ code string }

func (e *rejection) Error() string { return "adapter: refused: " + e.code }

// transientFailure is a repeatable failure whose text carries the
// sentinel: a network error.
type transientFailure struct{ n int }

func (e *transientFailure) Error() string   { return sentinel }
func (e *transientFailure) Timeout() bool   { return false }
func (e *transientFailure) Temporary() bool { return true }

var _ net.Error = (*transientFailure)(nil)

// terminalFailure is a mailbox failure nothing repeats.
var terminalFailure = &rejection{code: "AUTHENTICATIONFAILED"}

// droppedConnection is the transient failure adapters report most often.
var droppedConnection = &transportFailure{op: "UID FETCH", err: io.ErrUnexpectedEOF}

// counter counts calls safely.
type counter struct {
	mu sync.Mutex
	n  int
}

func (c *counter) inc() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.n++
	return c.n
}

func (c *counter) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// requireUnavailable asserts err is one *DependencyUnavailableError of key
// with the rejection and library error given.
func requireUnavailable(t *testing.T, err error, key resilience.Key, kind resilience.Rejection, libErr error) *resilience.DependencyUnavailableError {
	t.Helper()
	du, ok := errors.AsType[*resilience.DependencyUnavailableError](err)
	require.True(t, ok, "want *DependencyUnavailableError, got %T: %v", err, err)
	require.Equal(t, key.Class, du.Class)
	require.Equal(t, key.Instance, du.Instance)
	require.Equal(t, kind, du.Rejection)
	require.ErrorIs(t, err, libErr)
	require.ErrorIs(t, err, resilience.ErrDependencyUnavailable)
	require.True(t, failure.IsDependencyUnavailable(err))
	require.NotContains(t, err.Error(), sentinel)
	return du
}

// blockUntilDone is an attempt that stalls until its context ends.
func blockUntilDone(ctx context.Context) error {
	<-ctx.Done()
	return &transportFailure{op: "UID FETCH", err: ctx.Err()}
}
