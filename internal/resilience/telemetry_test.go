package resilience_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

func TestTelemetry(t *testing.T) {
	t.Parallel()

	type logLine map[string]any

	// run drives one of every outcome through the registry: a retried and
	// exhausted transient failure that opens account-a's circuit, a
	// rejection by that circuit, a terminal failure, a success, a
	// cancellation, a provider failure, and the circuit's recovery.
	run := func(t *testing.T) (b *testBundle, lines []logLine) {
		t.Helper()
		// The break runs out on the fake clock of a synctest bubble, so
		// the trial call comes exactly one break duration after the
		// circuit opened.
		const breakDuration = 100 * time.Millisecond
		synctest.Test(t, func(t *testing.T) {
			var ctx context.Context
			ctx, b = setup(t, fastBudget(func(b *resilience.Budget) {
				b.MaxAttempts = 2
				b.BaseDelay, b.MaxDelay = 10*time.Millisecond, 10*time.Millisecond
				b.AttemptTimeout = time.Second
				b.CircuitBreakerMinimumThroughput = 2
				b.CircuitBreakerBreakDuration = breakDuration
			}), nil, nil)
			r := b.registry

			// The failures all carry the sentinel in their text: the address a
			// mail server quotes, its own words, a payload.
			transient := &transportFailure{op: "UID FETCH", err: &transientFailure{}}
			terminal := errors.New(sentinel)

			require.ErrorIs(t, r.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error { return transient }), transient)
			require.True(t, failure.IsDependencyUnavailable(r.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error { return nil })))
			require.ErrorIs(t, r.Execute(ctx, accountB, "Archive", func(ctx context.Context) error { return terminal }), terminal)
			require.NoError(t, r.Execute(ctx, accountB, "Archive", func(ctx context.Context) error { return nil }))
			cctx, cancel := context.WithCancel(ctx)
			require.ErrorIs(t, r.Execute(cctx, database, "select", func(ctx context.Context) error { cancel(); return blockUntilDone(ctx) }), context.Canceled)
			refused := httpStatusError(400) // a refused request: terminal for a provider
			require.Equal(t, error(refused), r.Execute(ctx, provider, "embed", func(ctx context.Context) error { return refused }))

			// After the break the trial call, on another folder, closes it.
			time.Sleep(breakDuration)
			require.NoError(t, r.Execute(ctx, accountA, "Sent", func(ctx context.Context) error { return nil }))

			for _, raw := range strings.Split(strings.TrimSpace(b.logs.String()), "\n") {
				var l logLine
				require.NoError(t, json.Unmarshal([]byte(raw), &l), raw)
				lines = append(lines, l)
			}
		})
		return b, lines
	}

	t.Run("LogLinesCarryTheVocabularyAndNoFailureText", func(t *testing.T) {
		t.Parallel()
		b, lines := run(t)
		logs := b.logs.String()
		require.NotContains(t, logs, sentinel)
		require.NotContains(t, logs, "jane.doe")

		allowed := map[string]bool{"time": true, "level": true, "msg": true, "class": true, "instance": true,
			"operation": true, "failure_type": true, "attempt": true, "delay": true, "rejection": true}
		byMsg := map[string][]logLine{}
		for _, l := range lines {
			for k := range l {
				require.True(t, allowed[k], "unexpected log attribute %q in %v", k, l)
			}
			byMsg[l["msg"].(string)] = append(byMsg[l["msg"].(string)], l)
		}

		retries := byMsg["outbound call failed; retry scheduled"]
		require.Len(t, retries, 1)
		require.Equal(t, "MailboxDataRetrieval", retries[0]["class"])
		require.Equal(t, "account-a", retries[0]["instance"])
		require.Equal(t, "INBOX", retries[0]["operation"])
		require.Equal(t, "*resilience_test.transportFailure", retries[0]["failure_type"])
		require.EqualValues(t, 1, retries[0]["attempt"])
		require.Positive(t, retries[0]["delay"])

		opened := byMsg["outbound circuit opened"]
		require.Len(t, opened, 1)
		require.Equal(t, "WARN", opened[0]["level"])
		require.Equal(t, "account-a", opened[0]["instance"])
		require.Equal(t, "INBOX", opened[0]["operation"])
		require.Equal(t, "*resilience_test.transportFailure", opened[0]["failure_type"])
		require.EqualValues(t, 2, opened[0]["attempt"])
		require.EqualValues(t, 100*time.Millisecond, opened[0]["delay"])

		closed := byMsg["outbound circuit closed"]
		require.Len(t, closed, 1)
		require.Equal(t, "account-a", closed[0]["instance"])
		require.Equal(t, "Sent", closed[0]["operation"], "the trial call that closed it")
		halfOpen := byMsg["outbound circuit half-open: admitting one trial call"]
		require.Len(t, halfOpen, 1)
		require.NotContains(t, halfOpen[0], "operation", "the break ran out; no operation caused it")
	})

	t.Run("MetricsAreLabelledFromTheFixedVocabulary", func(t *testing.T) {
		t.Parallel()
		b, _ := run(t)
		families, err := b.metrics.Gather()
		require.NoError(t, err)

		vocabulary := map[string]map[string]bool{
			"class":    {},
			"instance": {"account-a": true, "account-b": true, "shared": true, "embeddings": true},
			"outcome":  {"success": true, "terminal_failure": true, "transient_failure": true, "unavailable": true, "canceled": true},
			"kind":     {"concurrency_limit": true, "circuit_open": true, "attempt_timeout": true, "total_timeout": true},
			"state":    {"closed": true, "half_open": true, "open": true},
		}
		for _, c := range resilience.Classes() {
			vocabulary["class"][string(c)] = true
		}
		values := map[string]float64{}
		names := map[string]bool{}
		for _, f := range families {
			require.True(t, strings.HasPrefix(f.GetName(), "mailfathom_resilience_"), f.GetName())
			names[f.GetName()] = true
			for _, m := range f.GetMetric() {
				var id []string
				for _, l := range m.GetLabel() {
					allowed, known := vocabulary[l.GetName()]
					require.True(t, known, "label %q of %s", l.GetName(), f.GetName())
					require.True(t, allowed[l.GetValue()], "label %s=%q of %s is outside the vocabulary", l.GetName(), l.GetValue(), f.GetName())
					require.NotContains(t, l.GetValue(), sentinel)
					id = append(id, l.GetName()+"="+l.GetValue())
				}
				values[f.GetName()+"{"+strings.Join(id, ",")+"}"] = value(m)
			}
		}
		require.Equal(t, map[string]bool{
			"mailfathom_resilience_retries_total":               true,
			"mailfathom_resilience_rejections_total":            true,
			"mailfathom_resilience_circuit_state_changes_total": true,
			"mailfathom_resilience_circuit_state":               true,
			"mailfathom_resilience_execution_duration_seconds":  true,
		}, names)

		const a = "class=MailboxDataRetrieval,instance=account-a"
		require.Equal(t, 1.0, values["mailfathom_resilience_retries_total{"+a+"}"])
		require.Equal(t, 0.0, values["mailfathom_resilience_retries_total{class=MailboxDataRetrieval,instance=account-b}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_rejections_total{"+a+",kind=circuit_open}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_circuit_state_changes_total{"+a+",state=open}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_circuit_state_changes_total{"+a+",state=half_open}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_circuit_state_changes_total{"+a+",state=closed}"])
		require.Equal(t, 0.0, values["mailfathom_resilience_circuit_state{"+a+"}"], "closed again")
		require.Equal(t, 1.0, values["mailfathom_resilience_execution_duration_seconds{"+a+",outcome=transient_failure}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_execution_duration_seconds{"+a+",outcome=unavailable}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_execution_duration_seconds{"+a+",outcome=success}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_execution_duration_seconds{class=MailboxDataRetrieval,instance=account-b,outcome=terminal_failure}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_execution_duration_seconds{class=DatabaseCommandExecution,instance=shared,outcome=canceled}"])
		require.Equal(t, 1.0, values["mailfathom_resilience_execution_duration_seconds{class=AiProviderInvocation,instance=embeddings,outcome=terminal_failure}"])
	})

	t.Run("OpenCircuitGauge", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, fastBudget(func(b *resilience.Budget) {
			b.MaxAttempts = 1
			b.CircuitBreakerMinimumThroughput = 1
		}), nil, nil)
		require.Error(t, b.registry.Execute(ctx, accountA, "INBOX", func(ctx context.Context) error { return droppedConnection }))
		families, err := b.metrics.Gather()
		require.NoError(t, err)
		for _, f := range families {
			if f.GetName() == "mailfathom_resilience_circuit_state" {
				require.Len(t, f.GetMetric(), 1)
				require.Equal(t, 2.0, f.GetMetric()[0].GetGauge().GetValue())
				return
			}
		}
		t.Fatal("no circuit state gauge")
	})

	t.Run("RegisteringTwiceFails", func(t *testing.T) {
		t.Parallel()
		_, b := setup(t, fastBudget(nil), nil, nil)
		_, err := resilience.NewRegistry(resilience.Options{Classifiers: testClassifiers(), Registerer: b.metrics})
		require.Error(t, err)
	})
}

func value(m *dto.Metric) float64 {
	switch {
	case m.GetCounter() != nil:
		return m.GetCounter().GetValue()
	case m.GetGauge() != nil:
		return m.GetGauge().GetValue()
	case m.GetHistogram() != nil:
		return float64(m.GetHistogram().GetSampleCount())
	}
	return -1
}

func TestFailureType(t *testing.T) {
	t.Parallel()
	require.Empty(t, failure.Name(nil))
	require.Equal(t, "*resilience_test.transportFailure", failure.Name(droppedConnection))
	require.Equal(t, "*resilience_test.transportFailure", failure.Name(errorsWrap(droppedConnection)), "looks through fmt.Errorf")
	require.Equal(t, "*errors.errorString", failure.Name(io.EOF))
	require.Equal(t, "AttemptTimeout", failure.Name(resilience.ErrAttemptTimeout))
	require.NotContains(t, failure.Name(errors.New(sentinel)), sentinel)
}

func errorsWrap(err error) error { return fmt.Errorf("session: %w", err) }

// httpStatusError is a provider's answer carrying its HTTP status.
type httpStatusError int

func (e httpStatusError) Error() string   { return fmt.Sprintf("status %d: %s", int(e), sentinel) }
func (e httpStatusError) HTTPStatus() int { return int(e) }
