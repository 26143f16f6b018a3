package resilience

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/failsafe-go/failsafe-go/bulkhead"
	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/retrypolicy"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/prometheus/client_golang/prometheus"
)

// Registry keeps one pipeline per Key, built lazily from the class's budget
// on first use and cached for the life of the process. Instances come from
// configured accounts and endpoints, so their number is bounded by the
// deployment rather than by traffic. A Registry is safe for concurrent use.
type Registry struct {
	budgets     map[DependencyClass]Budget
	classifiers map[DependencyClass]Classifier
	logger      *slog.Logger
	metrics     *metrics

	mu        sync.Mutex
	pipelines map[Key]*pipeline
}

// Options configure NewRegistry.
type Options struct {
	// Budgets are the limits per class, usually configuration's
	// (config.Config.Resilience). A declared class missing from it gets its
	// DefaultBudgets entry. Default: DefaultBudgets.
	Budgets map[DependencyClass]Budget
	// Classifiers decide, per protocol family, which failures are worth
	// repeating. Each adapter provides its family's; the Provider family
	// defaults to ProviderClassifier, which reads an HTTP status any
	// adapter's error can carry. Required: FamilyMailbox and
	// FamilyDatabase.
	Classifiers map[Family]Classifier
	// Logger receives the retry and circuit log lines. Default: discard.
	Logger *slog.Logger
	// Registerer is where the metric collectors are registered. Default:
	// none are registered.
	Registerer prometheus.Registerer
}

// NewRegistry returns a registry building pipelines from opts.
//
// It fails on a budget keyed by an undeclared class, an invalid budget, a
// family without a classifier, or a collector that cannot be registered.
func NewRegistry(opts Options) (*Registry, error) {
	var errs []error
	resolved := DefaultBudgets()
	for class, b := range opts.Budgets {
		if !class.Declared() {
			errs = append(errs, fmt.Errorf("resilience: budget for %q: %w", string(class), ErrUndeclaredClass))
			continue
		}
		if err := b.Validate(); err != nil {
			errs = append(errs, fmt.Errorf("resilience: budget for %s: %w", class, err))
			continue
		}
		resolved[class] = b
	}
	byFamily := map[Family]Classifier{FamilyProvider: ProviderClassifier{}}
	for family, c := range opts.Classifiers {
		if c == nil {
			errs = append(errs, fmt.Errorf("resilience: the classifier of family %s is nil", family))
			continue
		}
		byFamily[family] = c
	}
	classifiers := map[DependencyClass]Classifier{}
	for _, class := range classes {
		c, ok := byFamily[class.Family()]
		if !ok {
			errs = append(errs, fmt.Errorf("resilience: no classifier for family %s (class %s)", class.Family(), class))
			continue
		}
		classifiers[class] = c
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	logger := cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	m, err := newMetrics(opts.Registerer)
	if err != nil {
		return nil, err
	}
	return &Registry{
		budgets:     resolved,
		classifiers: classifiers,
		logger:      logger,
		metrics:     m,
		pipelines:   map[Key]*pipeline{},
	}, nil
}

// Budget returns the budget the registry builds class's pipelines from.
func (r *Registry) Budget(class DependencyClass) (Budget, bool) {
	b, ok := r.budgets[class]
	return b, ok
}

// Classify is the question the pipeline asks about a failed attempt, asked
// outside one: the caller's own cancellation (context.Canceled anywhere in
// err's chain) is Canceled, a failure whose budget is spent and anything
// the class's family does not call transient are Terminal.
func (r *Registry) Classify(class DependencyClass, err error) Verdict {
	if err == nil {
		return Terminal
	}
	if errors.Is(err, context.Canceled) {
		return Canceled
	}
	if failure.IsBudgetSpent(err) {
		return Terminal
	}
	if c := r.classifiers[class]; c != nil && c.Transient(err) {
		return Transient
	}
	return Terminal
}

// Execute runs fn under the pipeline of key. operation names what is done
// for the logs — a folder alias, or OperationFolderDiscovery — and, like the
// instance, is deployment vocabulary, never mail. fn must honour its
// context: the pipeline's timeouts cancel it, and an attempt ends only when
// fn returns. Attempt(ctx) tells fn which attempt it is.
//
// It returns nil on success; a *DependencyUnavailableError when the pipeline
// imposed a limit; the last failure, untranslated, when the retry gave up or
// the failure was terminal (or the total timeout expired during a backoff
// wait); the caller's own context error when ctx ended. An undeclared class
// (ErrUndeclaredClass), an empty instance (ErrNoInstance) or an execution of
// the same class already in flight on ctx (ErrNestedSameClass) fail at
// once, without running fn.
func (r *Registry) Execute(ctx context.Context, key Key, operation string, fn func(ctx context.Context) error) error {
	if !key.Class.Declared() {
		return fmt.Errorf("resilience: %q: %w", string(key.Class), ErrUndeclaredClass)
	}
	if key.Instance == "" {
		return fmt.Errorf("resilience: %s: %w", key.Class, ErrNoInstance)
	}
	mark := inFlight(ctx)
	bit := uint32(1) << key.Class.index()
	if mark&bit != 0 {
		return fmt.Errorf("resilience: %s: %w", key.Class, ErrNestedSameClass)
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	p := r.pipeline(key)
	return p.execute(ctx, context.WithValue(ctx, inFlightKey{}, mark|bit), operation, fn)
}

// Get is Execute for a function with a result: the result of the attempt
// that succeeded, or T's zero value with the error.
func Get[T any](ctx context.Context, r *Registry, key Key, operation string, fn func(ctx context.Context) (T, error)) (T, error) {
	var out T
	err := r.Execute(ctx, key, operation, func(ctx context.Context) error {
		v, err := fn(ctx)
		if err == nil {
			out = v
		}
		return err
	})
	if err != nil {
		var zero T
		return zero, err
	}
	return out, nil
}

// Acquire is Get for a resource that must be released, such as a
// connection or a lock. An attempt the pipeline abandoned (its timeout
// fired) may still obtain its resource as it returns, and a later attempt
// may then succeed too: Acquire hands every resource the pipeline did not
// accept to release, so nothing an abandoned attempt obtained outlives the
// call. It returns the resource of the attempt the pipeline accepted.
//
// An attempt whose context has ended by the time it obtained its resource
// releases it at once, before another attempt competes with it; one the
// pipeline abandons in the instant after is released when the call
// returns. acquire must honour its context like any fn given to Execute;
// release must not block for long.
func Acquire[T any](ctx context.Context, r *Registry, key Key, operation string, acquire func(ctx context.Context) (T, error), release func(T)) (T, error) {
	var obtained []T
	err := r.Execute(ctx, key, operation, func(ctx context.Context) error {
		v, err := acquire(ctx)
		if err != nil {
			return err
		}
		if cerr := ctx.Err(); cerr != nil {
			// Abandoned already: give it back before another attempt
			// competes with it (for a lock, say).
			release(v)
			return cerr
		}
		obtained = append(obtained, v)
		return nil
	})
	var zero T
	if err != nil {
		for _, v := range obtained {
			release(v)
		}
		return zero, err
	}
	// The pipeline accepts the first success it sees and ends there, so
	// the accepted resource is the last one obtained; any before it came
	// from attempts it abandoned.
	for _, v := range obtained[:len(obtained)-1] {
		release(v)
	}
	return obtained[len(obtained)-1], nil
}

// Runner is a Registry bound to one key, for an adapter that should not
// know about keys — or cannot import this package: its Execute method is
// satisfied by an interface the adapter declares itself.
type Runner struct {
	registry *Registry
	key      Key
}

// Runner binds key. The key is checked when Execute runs.
func (r *Registry) Runner(key Key) Runner { return Runner{registry: r, key: key} }

// Key returns the bound key.
func (b Runner) Key() Key { return b.key }

// Execute is Registry.Execute with the bound key.
func (b Runner) Execute(ctx context.Context, operation string, fn func(ctx context.Context) error) error {
	return b.registry.Execute(ctx, b.key, operation, fn)
}

func (r *Registry) pipeline(key Key) *pipeline {
	r.mu.Lock()
	defer r.mu.Unlock()
	if p, ok := r.pipelines[key]; ok {
		return p
	}
	p := newPipeline(key, r.budgets[key.Class], r.classifiers[key.Class], r.logger, r.metrics)
	r.pipelines[key] = p
	return p
}

// errPanicked ends an attempt whose function panicked; Execute re-panics.
var errPanicked = errors.New("resilience: the operation panicked")

// pipeline is the composed strategies of one key. The limiter and the
// breaker hold the instance's state; everything else is per execution.
type pipeline struct {
	key        Key
	budget     Budget
	classifier Classifier
	executor   failsafe.Executor[any]
	tel        *pipelineTelemetry
	// lastOperation is the operation of the attempt started last, which
	// names a circuit closing: the breaker reports a close without the
	// execution that caused it, and in half-open only one trial runs.
	lastOperation atomic.Pointer[string]
}

func newPipeline(key Key, b Budget, classifier Classifier, logger *slog.Logger, m *metrics) *pipeline {
	p := &pipeline{key: key, budget: b, classifier: classifier, tel: m.forKey(key, logger)}
	repeatable := func(_ any, err error) bool { return p.repeatable(err) }

	limiter := bulkhead.NewBuilder[any](uint(b.ConcurrencyLimit)).Build() // no wait time: full means rejected, never queued
	total := timeout.NewBuilder[any](b.TotalTimeout).
		OnTimeoutExceeded(func(e failsafe.ExecutionDoneEvent[any]) {
			if st := executionFrom(e.Context()); st != nil {
				st.totalTimeoutExpired()
			}
		}).
		Build()
	retry := retrypolicy.NewBuilder[any]().
		HandleIf(repeatable).
		AbortOnErrors(bulkhead.ErrFull, circuitbreaker.ErrOpen).
		ReturnLastFailure().
		WithMaxAttempts(b.MaxAttempts).
		WithDelayFunc(p.backoff).
		OnRetryScheduled(p.onRetryScheduled).
		Build()
	breaker := circuitbreaker.NewBuilder[any]().
		HandleIf(repeatable).
		WithFailureRateThreshold(b.CircuitBreakerFailureRatio, uint(b.CircuitBreakerMinimumThroughput), b.CircuitBreakerSamplingDuration).
		WithSuccessThreshold(1).
		WithDelay(b.CircuitBreakerBreakDuration).
		OnStateChanged(p.onStateChanged).
		Build()
	attempt := timeout.New[any](b.AttemptTimeout)

	// failsafe.With composes its first policy outermost.
	p.executor = failsafe.With[any](limiter, total, retry, breaker, attempt)
	return p
}

// repeatable is the question both the retry and the breaker ask about an
// attempt's failure: the pipeline's own rejections never are, an abandoned
// attempt is what the family says about ErrAttemptTimeout, the caller's
// cancellation never is, and everything else is the classifier's call.
// failsafe-go returns its rejections as the bare sentinels, so they are
// compared by identity: a nested pipeline's rejection, wrapped in its own
// *DependencyUnavailableError, is a failure like any other.
func (p *pipeline) repeatable(err error) bool {
	switch {
	case err == nil, err == bulkhead.ErrFull, err == circuitbreaker.ErrOpen, err == errPanicked:
		return false
	case err == timeout.ErrExceeded:
		return p.classifier.Transient(ErrAttemptTimeout)
	case isCallerDone(err), errors.Is(err, context.Canceled), failure.IsBudgetSpent(err):
		return false
	}
	return p.classifier.Transient(err)
}

// backoff is exponential with jitter: the ceiling starts at BaseDelay,
// doubles per retry and is capped at MaxDelay; the wait is drawn uniformly
// from its upper half, so it never collapses to nothing. It exceeds
// MaxDelay only when the failure asked for a longer wait (RetryAfterer);
// the total timeout still bounds it.
func (p *pipeline) backoff(exec failsafe.ExecutionAttempt[any]) time.Duration {
	ceiling := p.budget.BaseDelay
	for i := 1; i < exec.Attempts() && ceiling < p.budget.MaxDelay; i++ {
		ceiling *= 2
	}
	ceiling = min(ceiling, p.budget.MaxDelay)
	half := ceiling / 2
	wait := half + rand.N(ceiling-half+1)
	var ra RetryAfterer
	if errors.As(exec.LastError(), &ra) {
		wait = max(wait, ra.RetryAfter())
	}
	return wait
}

func (p *pipeline) execute(caller, ctx context.Context, operation string, fn func(context.Context) error) error {
	st := &execution{operation: operation, caller: caller}
	ctx = context.WithValue(ctx, executionKey{}, st)
	op := operation
	start := time.Now()
	var panicked bool
	var panicValue any
	err := p.executor.WithContext(ctx).RunWithExecution(func(exec failsafe.Execution[any]) (err error) {
		// failsafe-go lets a panic skip every policy's bookkeeping, which
		// would leak the limiter's permit for good: the attempt ends with
		// errPanicked instead, and the panic resumes once the policies
		// have unwound.
		defer func() {
			if v := recover(); v != nil {
				panicked, panicValue, err = true, v, errPanicked
			}
		}()
		n := exec.Attempts()
		st.beginAttempt(n)
		p.lastOperation.Store(&op)
		attemptCtx := exec.Context()
		err = fn(context.WithValue(attemptCtx, attemptKey{}, n))
		st.endAttempt(err, attemptCtx)
		if err != nil && caller.Err() != nil {
			return &callerDoneError{err: err}
		}
		return err
	})
	if panicked {
		panic(panicValue)
	}
	o, rejection, out := p.settle(caller, st, err)
	p.tel.executed(caller, operation, o, rejection, time.Since(start))
	return out
}

// settle turns what the composed policies returned into what the caller
// sees, and names the outcome for the metrics.
func (p *pipeline) settle(caller context.Context, st *execution, err error) (outcome, Rejection, error) {
	if err == nil {
		return outcomeSuccess, "", nil
	}
	// The caller's own cancellation is never translated.
	if cerr := caller.Err(); cerr != nil {
		inner := err
		if d, ok := errors.AsType[*callerDoneError](err); ok {
			inner = d.err
		}
		if errors.Is(inner, cerr) {
			return outcomeCanceled, "", inner
		}
		return outcomeCanceled, "", cerr
	}
	switch err {
	case bulkhead.ErrFull:
		return p.unavailable(RejectionConcurrencyLimit, err)
	case circuitbreaker.ErrOpen:
		return p.unavailable(RejectionCircuitOpen, err)
	case timeout.ErrExceeded:
		st.mu.Lock()
		expired, waiting, last := st.expired, st.expiredWaiting, st.lastFailure
		st.mu.Unlock()
		switch {
		case !expired:
			// Only the attempt timeout fired: it ended the last attempt.
			return p.unavailable(RejectionAttemptTimeout, err)
		case !waiting || last == nil:
			// The total timeout expired inside an attempt.
			return p.unavailable(RejectionTotalTimeout, err)
		case last == timeout.ErrExceeded:
			// Expired while waiting to retry an abandoned attempt.
			return p.unavailable(RejectionAttemptTimeout, last)
		default:
			// Expired while waiting to retry: the failure that ended the
			// last attempt is the more useful of the two causes.
			return outcomeTransient, "", last
		}
	}
	if p.repeatable(err) {
		return outcomeTransient, "", err
	}
	return outcomeTerminal, "", err
}

func (p *pipeline) unavailable(kind Rejection, libErr error) (outcome, Rejection, error) {
	return outcomeUnavailable, kind, &DependencyUnavailableError{Class: p.key.Class, Instance: p.key.Instance, Rejection: kind, Err: libErr}
}

func (p *pipeline) onRetryScheduled(e failsafe.ExecutionScheduledEvent[any]) {
	st := executionFrom(e.Context())
	if st == nil {
		return
	}
	st.retryScheduled(e.LastError())
	p.tel.retryScheduled(e.Context(), st.operation, e.LastError(), e.Attempts(), e.Delay)
}

func (p *pipeline) onStateChanged(e circuitbreaker.StateChangedEvent) {
	ctx := e.Context()
	operation, attempt, failure := "", 0, error(nil)
	if st := executionFrom(ctx); st != nil {
		operation = st.operation
		attempt, failure = st.snapshot()
	} else if op := p.lastOperation.Load(); op != nil {
		operation = *op
	}
	p.tel.circuitChanged(ctx, e.NewState, operation, failure, attempt, p.budget.CircuitBreakerBreakDuration)
}
