package resilience

import (
	"context"
	"errors"
	"sync"
)

type (
	inFlightKey  struct{}
	attemptKey   struct{}
	executionKey struct{}
)

// inFlight returns the bit set of classes executing on ctx's flow.
func inFlight(ctx context.Context) uint32 {
	v, _ := ctx.Value(inFlightKey{}).(uint32)
	return v
}

// InFlight reports whether an execution of class is in flight on ctx's
// flow, which is when executing class again on ctx fails with
// ErrNestedSameClass.
func InFlight(ctx context.Context, class DependencyClass) bool {
	i := class.index()
	return i >= 0 && inFlight(ctx)&(1<<i) != 0
}

// Attempt returns the number of the attempt ctx belongs to — 1 for the
// first call, 2 for the first retry — or 0 when ctx is not an attempt's
// context. It is the recovery hook of an adapter whose attempts share
// state: an attempt with a number above 1 follows a repeatable failure
// (or an abandoned attempt), so a session it uses must be re-established
// first.
func Attempt(ctx context.Context) int {
	v, _ := ctx.Value(attemptKey{}).(int)
	return v
}

// execution is the state of one Execute call the policies' listeners and
// the final translation share. The listeners reach it through the context
// failsafe-go hands them, which derives from the execution's context.
type execution struct {
	operation string
	caller    context.Context

	mu sync.Mutex
	// attempt is the number of the attempt under way or last made.
	attempt int
	// waiting is true from the moment a retry is scheduled until the next
	// attempt starts: the backoff wait.
	waiting bool
	// lastFailure is the failure that ended the last attempt as the retry
	// saw it (timeout.ErrExceeded for an abandoned attempt), recorded when
	// the retry was scheduled.
	lastFailure error
	// attemptFailure is the failure of the last attempt for the log, with
	// an abandoned attempt as ErrAttemptTimeout.
	attemptFailure error
	// expired is set when the total timeout fired; expiredWaiting when it
	// fired during a backoff wait.
	expired        bool
	expiredWaiting bool
}

func executionFrom(ctx context.Context) *execution {
	if ctx == nil {
		return nil
	}
	st, _ := ctx.Value(executionKey{}).(*execution)
	return st
}

func (st *execution) beginAttempt(n int) {
	st.mu.Lock()
	st.attempt, st.waiting = n, false
	st.mu.Unlock()
}

// endAttempt records what ended an attempt. An attempt whose context was
// cancelled by neither the caller nor the total timeout was abandoned at
// its attempt timeout.
func (st *execution) endAttempt(err error, attemptCtx context.Context) {
	if err == nil {
		return
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	if attemptCtx.Err() != nil && st.caller.Err() == nil && !st.expired {
		st.attemptFailure = ErrAttemptTimeout
	} else {
		st.attemptFailure = err
	}
}

func (st *execution) retryScheduled(lastFailure error) {
	st.mu.Lock()
	st.waiting, st.lastFailure = true, lastFailure
	st.mu.Unlock()
}

func (st *execution) totalTimeoutExpired() {
	st.mu.Lock()
	st.expired, st.expiredWaiting = true, st.waiting
	st.mu.Unlock()
}

func (st *execution) snapshot() (attempt int, attemptFailure error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.attempt, st.attemptFailure
}

// callerDoneError wraps the failure of an attempt that ended because the
// caller's own context ended, so neither the breaker nor the retry counts
// it as the dependency's failure.
type callerDoneError struct{ err error }

func (e *callerDoneError) Error() string { return e.err.Error() }
func (e *callerDoneError) Unwrap() error { return e.err }

func isCallerDone(err error) bool {
	_, ok := errors.AsType[*callerDoneError](err)
	return ok
}
