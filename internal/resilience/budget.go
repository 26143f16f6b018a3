package resilience

import (
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/mailfathom/mailfathom/internal/config"
)

// Budget is the limits of one dependency class; every instance of the class
// gets a pipeline built from it. Its fields mirror config.ResilienceBudget,
// which binds them from MAILFATHOM_RESILIENCE_<CLASS>_<SETTING>.
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

// DefaultBudgets returns the shipped budget of every declared class: what
// configuration yields when no MAILFATHOM_RESILIENCE_ variable is set. The
// defaults are written once, in package config (its REFERENCE.md lists
// them with their reasons), and read from there, so the two cannot drift.
//
//	class                              attempts base   max  attempt total ratio min  window break limit
//	MailboxSessionEstablishment        3        1s     10s  15s     45s   0.5   5    1m     30s   4
//	MailboxDataRetrieval               4        1s     15s  1m      3m    0.5   10   30s    15s   8
//	EmailDelivery                      2        1s     5s   30s     1m    0.5   5    1m     30s   2
//	DatabaseCommandExecution           3        200ms  2s   30s     1m    0.5   20   30s    5s    200
//	AiProviderInvocation               3        1s     10s  1m      3m    0.5   10   30s    30s   4
//	MailAuthorizationServerInvocation  3        100ms  1s   3s      10s   0.5   5    30s    15s   4
func DefaultBudgets() map[DependencyClass]Budget {
	return maps.Clone(defaultBudgets())
}

var defaultBudgets = sync.OnceValue(func() map[DependencyClass]Budget {
	cfg, err := config.Load(nil)
	if err != nil {
		// An empty environment is valid by construction, which package
		// config's tests hold.
		panic("resilience: configuration's defaults do not load: " + err.Error())
	}
	return BudgetsFromConfig(cfg.Resilience)
})

// BudgetsFromConfig returns the budgets configuration bound, keyed by
// class: the first argument of NewRegistry.
func BudgetsFromConfig(r config.Resilience) map[DependencyClass]Budget {
	out := make(map[DependencyClass]Budget, len(classes))
	for class, b := range r.Budgets() {
		out[fromConfigClass(class)] = Budget(b)
	}
	return out
}

// maxAttemptsLimit is the largest MaxAttempts a budget may have.
const maxAttemptsLimit = 20

// Validate checks b the way configuration does, without its ranges' upper
// bounds: every limit positive, the ratio in (0, 1], MaxAttempts 1 to 20,
// and no contradiction (AttemptTimeout or MaxDelay longer than
// TotalTimeout, BaseDelay longer than MaxDelay).
func (b Budget) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	if b.MaxAttempts < 1 || b.MaxAttempts > maxAttemptsLimit {
		bad("MaxAttempts %d is not from 1 to %d", b.MaxAttempts, maxAttemptsLimit)
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
