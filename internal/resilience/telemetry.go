package resilience

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/failsafe-go/failsafe-go/circuitbreaker"
	"github.com/failsafe-go/failsafe-go/timeout"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/prometheus/client_golang/prometheus"
)

// outcome is how an execution ended, the value of the "outcome" label.
type outcome string

const (
	// outcomeSuccess: fn returned nil.
	outcomeSuccess outcome = "success"
	// outcomeTerminal: a failure the family does not repeat.
	outcomeTerminal outcome = "terminal_failure"
	// outcomeTransient: a repeatable failure that survived the attempts
	// the budget allowed (or the total timeout during a backoff wait).
	outcomeTransient outcome = "transient_failure"
	// outcomeUnavailable: a limit the pipeline imposed.
	outcomeUnavailable outcome = "unavailable"
	// outcomeCanceled: the caller's own cancellation.
	outcomeCanceled outcome = "canceled"
)

// Circuit states as the "state" label and the state gauge's value.
const (
	stateClosed   = "closed"
	stateHalfOpen = "half_open"
	stateOpen     = "open"
)

func stateLabel(s circuitbreaker.State) (string, float64) {
	switch s {
	case circuitbreaker.OpenState:
		return stateOpen, 2
	case circuitbreaker.HalfOpenState:
		return stateHalfOpen, 1
	}
	return stateClosed, 0
}

// Metric names. Every label value is a declared class, a configured
// instance, or one of the fixed outcome, rejection and state names.
const (
	metricRetries      = "mailfathom_resilience_retries_total"
	metricRejections   = "mailfathom_resilience_rejections_total"
	metricStateChanges = "mailfathom_resilience_circuit_state_changes_total"
	metricState        = "mailfathom_resilience_circuit_state"
	metricDuration     = "mailfathom_resilience_execution_duration_seconds"
)

type metrics struct {
	retries      *prometheus.CounterVec
	rejections   *prometheus.CounterVec
	stateChanges *prometheus.CounterVec
	state        *prometheus.GaugeVec
	duration     *prometheus.HistogramVec
}

func newMetrics(reg prometheus.Registerer) (*metrics, error) {
	m := &metrics{
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricRetries,
			Help: "Retries scheduled by outbound resilience pipelines, by dependency class and instance (account id, endpoint alias or shared).",
		}, []string{"class", "instance"}),
		rejections: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricRejections,
			Help: "Executions an outbound resilience pipeline refused or abandoned, by class, instance and kind (concurrency_limit, circuit_open, attempt_timeout, total_timeout).",
		}, []string{"class", "instance", "kind"}),
		stateChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: metricStateChanges,
			Help: "Circuit breaker transitions, by class, instance and the state entered (open, half_open, closed).",
		}, []string{"class", "instance", "state"}),
		state: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: metricState,
			Help: "Circuit breaker state by class and instance: 0 closed, 1 half-open, 2 open.",
		}, []string{"class", "instance"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    metricDuration,
			Help:    "Duration of outbound executions including retries and backoff, by class, instance and outcome (success, terminal_failure, transient_failure, unavailable, canceled).",
			Buckets: []float64{.005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 180, 600},
		}, []string{"class", "instance", "outcome"}),
	}
	if reg == nil {
		return m, nil
	}
	for _, c := range []prometheus.Collector{m.retries, m.rejections, m.stateChanges, m.state, m.duration} {
		if err := reg.Register(c); err != nil {
			return nil, fmt.Errorf("resilience: registering metrics: %w", err)
		}
	}
	return m, nil
}

// pipelineTelemetry is the instruments and the logger of one key.
//
// A key's series are created when they first have something to count: an
// instance that only ever succeeds has its success histogram and its
// circuit state, not a zero series for every outcome, rejection and retry.
// Every configured account has two mailbox pipelines for as long as the
// process runs, so what a pipeline keeps is what an account costs.
type pipelineTelemetry struct {
	m               *metrics
	class, instance string
	logger          *slog.Logger // without the key's attributes; see log
	state           prometheus.Gauge
}

func (m *metrics) forKey(key Key, logger *slog.Logger) *pipelineTelemetry {
	class := string(key.Class)
	t := &pipelineTelemetry{
		m:        m,
		class:    class,
		instance: key.Instance,
		logger:   logger,
		state:    m.state.WithLabelValues(class, key.Instance),
	}
	t.state.Set(0)
	return t
}

// log writes one line with the key's class and instance. The attributes are
// added per line rather than kept in a derived logger: the lines are rare
// and a derived handler would be kept for every instance.
func (t *pipelineTelemetry) log(ctx context.Context, level slog.Level, msg string, attrs ...slog.Attr) {
	if !t.logger.Enabled(ctx, level) {
		return
	}
	t.logger.LogAttrs(ctx, level, msg, append([]slog.Attr{slog.String("class", t.class), slog.String("instance", t.instance)}, attrs...)...)
}

func (t *pipelineTelemetry) executed(ctx context.Context, operation string, o outcome, r Rejection, d time.Duration) {
	t.m.duration.WithLabelValues(t.class, t.instance, string(o)).Observe(d.Seconds())
	if r != "" {
		t.m.rejections.WithLabelValues(t.class, t.instance, string(r)).Inc()
		t.log(ctx, slog.LevelDebug, "outbound dependency unavailable",
			slog.String("operation", operation), slog.String("rejection", string(r)))
	}
}

// retryScheduled logs a retry with the failure's type name, never its text:
// a mail server puts the rejected recipient into its error text.
func (t *pipelineTelemetry) retryScheduled(ctx context.Context, operation string, failed error, attempt int, delay time.Duration) {
	t.m.retries.WithLabelValues(t.class, t.instance).Inc()
	t.log(ctx, slog.LevelInfo, "outbound call failed; retry scheduled",
		slog.String("operation", operation),
		slog.String("failure_type", failure.Name(failed)),
		slog.Int("attempt", attempt),
		slog.Duration("delay", delay))
}

func (t *pipelineTelemetry) circuitChanged(ctx context.Context, s circuitbreaker.State, operation string, failed error, attempt int, breakDuration time.Duration) {
	label, value := stateLabel(s)
	t.state.Set(value)
	t.m.stateChanges.WithLabelValues(t.class, t.instance, label).Inc()
	if ctx == nil {
		ctx = context.Background()
	}
	switch s {
	case circuitbreaker.OpenState:
		t.log(ctx, slog.LevelWarn, "outbound circuit opened",
			slog.String("operation", operation),
			slog.String("failure_type", failure.Name(failed)),
			slog.Int("attempt", attempt),
			slog.Duration("delay", breakDuration))
	case circuitbreaker.HalfOpenState:
		// The break ran out; no operation caused the transition.
		t.log(ctx, slog.LevelInfo, "outbound circuit half-open: admitting one trial call")
	default:
		t.log(ctx, slog.LevelInfo, "outbound circuit closed",
			slog.String("operation", operation))
	}
}

// The attempt timeout is named AttemptTimeout, whichever of failsafe-go's
// rejection or ErrAttemptTimeout reports it.
func init() {
	failure.NameBy(func(err error) string {
		if errors.Is(err, timeout.ErrExceeded) || errors.Is(err, ErrAttemptTimeout) {
			return "AttemptTimeout"
		}
		return ""
	})
}
