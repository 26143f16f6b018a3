// Package verdicts checks the verdicts an adapter's classifier gives, as
// the outbound registry applies them to every class of the adapter's
// family. It is test infrastructure: each adapter's classification test
// lists its own failures, and the cases every family shares are added here.
package verdicts

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// Case is one failure and the verdict it must get. It is an alias of an
// unnamed struct so that a test's table can list cases unkeyed.
type Case = struct {
	Name string
	Err  error
	Want resilience.Verdict
}

// Wrapped wraps err the way an adapter adds context.
func Wrapped(err error) error { return fmt.Errorf("adapter: %w", err) }

// Spent translates err as a failure that survived its own pipeline:
// whatever the cause says, no outer pipeline repeats it.
func Spent(err error) error { return spent{err} }

type spent struct{ err error }

func (e spent) Error() string     { return "spent: " + e.err.Error() }
func (e spent) Unwrap() error     { return e.err }
func (e spent) BudgetSpent() bool { return true }

// Check asserts the verdict of every case, and of the cases every family
// shares (the caller's cancellation, an unrecognized failure, a nested
// pipeline's rejection), for every class of family, through the registry
// every outbound call runs under.
func Check(t *testing.T, family resilience.Family, cases []Case) {
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
		Case{"caller cancellation", context.Canceled, resilience.Canceled},
		Case{"unrecognized", errors.New("SENTINEL"), resilience.Terminal},
		Case{"nested pipeline rejection", &resilience.DependencyUnavailableError{Class: resilience.MailboxSessionEstablishment, Instance: "a", Rejection: resilience.RejectionCircuitOpen}, resilience.Terminal},
	)
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			t.Parallel()
			for _, class := range classes {
				require.Equal(t, tc.Want, reg.Classify(class, tc.Err), "%s: %s", class, failure.Name(tc.Err))
			}
		})
	}
}
