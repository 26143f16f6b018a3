package failure

import "errors"

// The behaviour interfaces: a failure declares what it means by a method,
// so code that cannot import the package that defines it (and code that
// should not care which package that is) decides on behaviour, found with
// errors.As anywhere in the chain. The functions below are the one way to
// ask; none of them looks at a failure's type or text.

// RetryLater is a failure that declares whether it is worth attempting
// again later, on the job's own schedule.
type RetryLater interface{ RetryLater() bool }

// BudgetSpent is a failure a resilience pipeline already spent its budget
// on: no enclosing pipeline repeats it, whatever its cause says.
type BudgetSpent interface{ BudgetSpent() bool }

// ConcurrencyConflict is a lost optimistic-concurrency race, which the store
// retries itself and no pipeline repeats.
type ConcurrencyConflict interface{ ConcurrencyConflict() bool }

// DependencyUnavailable is a dependency that declined the work: a limit a
// pipeline imposed (an open circuit, a full bulkhead, a timeout).
type DependencyUnavailable interface{ DependencyUnavailable() bool }

// WorthRetryingLater returns what the first failure in err's chain that
// declares it (RetryLater) says, and whether one declares it at all.
func WorthRetryingLater(err error) (later, declared bool) {
	var r RetryLater
	if errors.As(err, &r) {
		return r.RetryLater(), true
	}
	return false, false
}

// IsBudgetSpent reports whether err declares its budget spent (BudgetSpent).
func IsBudgetSpent(err error) bool {
	var b BudgetSpent
	return errors.As(err, &b) && b.BudgetSpent()
}

// IsConcurrencyConflict reports whether err declares itself a lost race
// (ConcurrencyConflict).
func IsConcurrencyConflict(err error) bool {
	var c ConcurrencyConflict
	return errors.As(err, &c) && c.ConcurrencyConflict()
}

// IsDependencyUnavailable reports whether err declares that a dependency
// declined the work (DependencyUnavailable).
func IsDependencyUnavailable(err error) bool {
	var d DependencyUnavailable
	return errors.As(err, &d) && d.DependencyUnavailable()
}
