package resilience

import (
	"errors"
	"fmt"
	"maps"
	"time"
)

// Budget is the limits of one dependency class; every instance of the class
// gets a pipeline built from it. Package config binds each field from
// MAILFATHOM_RESILIENCE_<CLASS>_<SETTING>, defaulting to DefaultBudgets.
type Budget struct {
	// MaxAttempts counts the first call; 1 disables retry and leaves the
	// other strategies in place.
	MaxAttempts int
	// BaseDelay is the backoff ceiling before the first retry, doubled per
	// retry up to MaxDelay. The wait is drawn from the upper half of the
	// ceiling, so it is never longer than MaxDelay.
	BaseDelay time.Duration
	// MaxDelay caps one backoff wait.
	MaxDelay time.Duration
	// AttemptTimeout bounds one attempt; its expiry cancels the attempt's
	// context.
	AttemptTimeout time.Duration
	// TotalTimeout bounds the whole operation, backoff waits included.
	TotalTimeout time.Duration
	// CircuitBreakerFailureRatio is the share of failed attempts within the
	// sampling window that opens the circuit, in (0, 1].
	CircuitBreakerFailureRatio float64
	// CircuitBreakerMinimumThroughput is how many attempts the window must
	// hold before the ratio can open the circuit.
	CircuitBreakerMinimumThroughput int
	// CircuitBreakerSamplingDuration is the sliding window.
	CircuitBreakerSamplingDuration time.Duration
	// CircuitBreakerBreakDuration is how long an open circuit rejects before
	// it lets one trial call through (half-open): the trial's success closes
	// it, its failure opens it again.
	CircuitBreakerBreakDuration time.Duration
	// ConcurrencyLimit is the executions in flight per instance; one more is
	// rejected at once, never queued.
	ConcurrencyLimit int
}

// defaultBudgets is the shipped budget of every declared class, the one
// table of defaults: configuration starts from it and names only the limits
// an operator disagrees with.
var defaultBudgets = map[DependencyClass]Budget{
	// Only a transport failure is repeated. The total timeout fits inside
	// one MailboxDataRetrieval attempt, because a retried read
	// re-establishes the session inside that attempt.
	MailboxSessionEstablishment: {
		MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: 10 * time.Second,
		AttemptTimeout: 15 * time.Second, TotalTimeout: 45 * time.Second,
		CircuitBreakerFailureRatio: 0.5, CircuitBreakerMinimumThroughput: 5,
		CircuitBreakerSamplingDuration: time.Minute, CircuitBreakerBreakDuration: 30 * time.Second,
		ConcurrencyLimit: 4,
	},
	// Both reads are repeatable by construction.
	MailboxDataRetrieval: {
		MaxAttempts: 4, BaseDelay: time.Second, MaxDelay: 15 * time.Second,
		AttemptTimeout: time.Minute, TotalTimeout: 3 * time.Minute,
		CircuitBreakerFailureRatio: 0.5, CircuitBreakerMinimumThroughput: 10,
		CircuitBreakerSamplingDuration: 30 * time.Second, CircuitBreakerBreakDuration: 15 * time.Second,
		ConcurrencyLimit: 8,
	},
	// One process-wide pipeline: short backoff, a quick break, and a limit
	// above the largest pool so the pool queues rather than the limiter
	// shedding.
	DatabaseCommandExecution: {
		MaxAttempts: 3, BaseDelay: 200 * time.Millisecond, MaxDelay: 2 * time.Second,
		AttemptTimeout: 30 * time.Second, TotalTimeout: time.Minute,
		CircuitBreakerFailureRatio: 0.5, CircuitBreakerMinimumThroughput: 20,
		CircuitBreakerSamplingDuration: 30 * time.Second, CircuitBreakerBreakDuration: 5 * time.Second,
		ConcurrencyLimit: 200,
	},
	// A provider call may take a while; a provider answering 429 gets a
	// longer break.
	AiProviderInvocation: {
		MaxAttempts: 3, BaseDelay: time.Second, MaxDelay: 10 * time.Second,
		AttemptTimeout: time.Minute, TotalTimeout: 3 * time.Minute,
		CircuitBreakerFailureRatio: 0.5, CircuitBreakerMinimumThroughput: 10,
		CircuitBreakerSamplingDuration: 30 * time.Second, CircuitBreakerBreakDuration: 30 * time.Second,
		ConcurrencyLimit: 4,
	},
	// Short on every axis: the attempt timeout, and even the total, sit
	// well inside the establishment attempt that encloses a token request,
	// so a hung authorization server surfaces as itself rather than as a
	// mailbox timeout.
	MailAuthorizationServerInvocation: {
		MaxAttempts: 3, BaseDelay: 100 * time.Millisecond, MaxDelay: time.Second,
		AttemptTimeout: 3 * time.Second, TotalTimeout: 10 * time.Second,
		CircuitBreakerFailureRatio: 0.5, CircuitBreakerMinimumThroughput: 5,
		CircuitBreakerSamplingDuration: 30 * time.Second, CircuitBreakerBreakDuration: 15 * time.Second,
		ConcurrencyLimit: 4,
	},
}

// DefaultBudgets returns a copy of the shipped budget of every declared
// class: what configuration yields when no MAILFATHOM_RESILIENCE_ variable
// is set.
func DefaultBudgets() map[DependencyClass]Budget {
	return maps.Clone(defaultBudgets)
}

// MaxAttemptsLimit is the largest MaxAttempts a budget may have.
const MaxAttemptsLimit = 20

// Validate checks b's own consistency: every limit positive, the ratio in
// (0, 1], MaxAttempts 1 to MaxAttemptsLimit, and no contradiction
// (AttemptTimeout or MaxDelay longer than TotalTimeout, BaseDelay longer
// than MaxDelay). It does not apply configuration's upper bounds, which are
// operator-facing choices rather than invariants.
func (b Budget) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if b.MaxAttempts < 1 || b.MaxAttempts > MaxAttemptsLimit {
		bad("MaxAttempts %d is not from 1 to %d", b.MaxAttempts, MaxAttemptsLimit)
	}
	for _, d := range []struct {
		name string
		v    time.Duration
	}{
		{"BaseDelay", b.BaseDelay}, {"MaxDelay", b.MaxDelay}, {"AttemptTimeout", b.AttemptTimeout},
		{"TotalTimeout", b.TotalTimeout}, {"CircuitBreakerSamplingDuration", b.CircuitBreakerSamplingDuration},
		{"CircuitBreakerBreakDuration", b.CircuitBreakerBreakDuration},
	} {
		if d.v <= 0 {
			bad("%s %s is not positive", d.name, d.v)
		}
	}
	if !(b.CircuitBreakerFailureRatio > 0 && b.CircuitBreakerFailureRatio <= 1) {
		bad("CircuitBreakerFailureRatio %v is not greater than 0 and at most 1", b.CircuitBreakerFailureRatio)
	}
	if b.CircuitBreakerMinimumThroughput < 1 {
		bad("CircuitBreakerMinimumThroughput %d is less than 1", b.CircuitBreakerMinimumThroughput)
	}
	if b.ConcurrencyLimit < 1 {
		bad("ConcurrencyLimit %d is less than 1", b.ConcurrencyLimit)
	}
	if b.AttemptTimeout > b.TotalTimeout {
		bad("AttemptTimeout %s is longer than TotalTimeout %s", b.AttemptTimeout, b.TotalTimeout)
	}
	if b.MaxDelay > b.TotalTimeout {
		bad("MaxDelay %s is longer than TotalTimeout %s", b.MaxDelay, b.TotalTimeout)
	}
	if b.BaseDelay > b.MaxDelay {
		bad("BaseDelay %s is longer than MaxDelay %s", b.BaseDelay, b.MaxDelay)
	}
	return errors.Join(errs...)
}
