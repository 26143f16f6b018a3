package resilience

import (
	"errors"
	"fmt"
)

// ErrUndeclaredClass is returned (wrapped) by Execute for a class that is
// not declared: it resolves no pipeline, so nothing runs.
var ErrUndeclaredClass = errors.New("resilience: undeclared dependency class")

// ErrNestedSameClass is returned (wrapped) by Execute when the context
// already carries an execution of the same class: one logical operation is
// retried at exactly one layer, and two layers around one call would
// multiply their attempts. Nothing runs.
var ErrNestedSameClass = errors.New("resilience: an execution of this dependency class is already in flight on this context")

// ErrNoInstance is returned (wrapped) by Execute for a key without an
// instance. A class with a single remote instance uses SharedInstance.
var ErrNoInstance = errors.New("resilience: the pipeline key names no instance")

// ErrDependencyUnavailable matches every *DependencyUnavailableError with
// errors.Is, for code that wants the identity without the type.
var ErrDependencyUnavailable = errors.New("resilience: dependency unavailable")

// Rejection is the kind of limit a pipeline imposed.
type Rejection string

// The limits a pipeline imposes. They are also the values of the "kind"
// metric label.
const (
	// RejectionConcurrencyLimit: the limiter was full; nothing ran.
	RejectionConcurrencyLimit Rejection = "concurrency_limit"
	// RejectionCircuitOpen: the circuit was open; nothing ran.
	RejectionCircuitOpen Rejection = "circuit_open"
	// RejectionAttemptTimeout: the last attempt was abandoned at its
	// per-attempt timeout.
	RejectionAttemptTimeout Rejection = "attempt_timeout"
	// RejectionTotalTimeout: the total timeout expired inside an attempt,
	// which was abandoned.
	RejectionTotalTimeout Rejection = "total_timeout"
)

func (r Rejection) describe() string {
	switch r {
	case RejectionConcurrencyLimit:
		return "its concurrency limit is reached"
	case RejectionCircuitOpen:
		return "its circuit is open"
	case RejectionAttemptTimeout:
		return "the attempt exceeded its timeout"
	case RejectionTotalTimeout:
		return "the operation exceeded its total timeout"
	}
	return string(r)
}

// DependencyUnavailableError is every limit a pipeline imposed — a shed
// execution, an open circuit, an abandoned attempt, an exhausted total
// timeout — as one type. Err is failsafe-go's rejection (bulkhead.ErrFull,
// circuitbreaker.ErrOpen or timeout.ErrExceeded), reachable with errors.Is.
// Its text names the class, the instance and the kind of limit, never
// anything from a failure.
//
// It declares itself repeatable later: a dependency declining the work is
// worth attempting again on the job's own schedule.
type DependencyUnavailableError struct {
	Class    DependencyClass
	Instance string
	// Rejection is the kind of limit.
	Rejection Rejection
	// Err is the library's rejection.
	Err error
}

func (e *DependencyUnavailableError) Error() string {
	return fmt.Sprintf("resilience: %s dependency %q is unavailable: %s", e.Class, e.Instance, e.Rejection.describe())
}

// Unwrap returns the library's rejection.
func (e *DependencyUnavailableError) Unwrap() error { return e.Err }

// Identity names the failure for operators: DependencyUnavailable.
func (e *DependencyUnavailableError) Identity() string { return "DependencyUnavailable" }

// Is makes errors.Is(err, ErrDependencyUnavailable) true.
func (e *DependencyUnavailableError) Is(target error) bool { return target == ErrDependencyUnavailable }

// DependencyUnavailable implements failure.DependencyUnavailable.
func (e *DependencyUnavailableError) DependencyUnavailable() bool { return true }

// BudgetSpent implements failure.BudgetSpent: a pipeline imposed this
// limit after spending what it was allowed to.
func (e *DependencyUnavailableError) BudgetSpent() bool { return true }
