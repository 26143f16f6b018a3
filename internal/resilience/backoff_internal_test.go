package resilience

import (
	"log/slog"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/stretchr/testify/require"
)

// attempts is an ExecutionAttempt that only knows how many attempts ran
// and what the last one failed with.
type attempts struct {
	failsafe.ExecutionAttempt[any]
	n    int
	last error
}

func (a attempts) Attempts() int    { return a.n }
func (a attempts) LastError() error { return a.last }

// askedToWait is a failure carrying a Retry-After.
type askedToWait time.Duration

func (a askedToWait) Error() string             { return "asked to wait" }
func (a askedToWait) RetryAfter() time.Duration { return time.Duration(a) }

func TestBackoffIsExponentialWithJitterAndCapped(t *testing.T) {
	t.Parallel()
	m, err := newMetrics(nil)
	require.NoError(t, err)
	b := DefaultBudgets()[MailboxDataRetrieval] // 1s doubling, capped at 15s
	p := newPipeline(Key{Class: MailboxDataRetrieval, Instance: "a"}, b, ProviderClassifier{}, slog.New(slog.DiscardHandler), m)

	ceilings := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 8 * time.Second, 15 * time.Second, 15 * time.Second, 15 * time.Second}
	for i, ceiling := range ceilings {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := p.backoff(attempts{n: i + 1})
			require.GreaterOrEqual(t, d, ceiling/2, "retry %d", i+1)
			require.LessOrEqual(t, d, ceiling, "retry %d never waits longer than its ceiling or MaxDelay", i+1)
			seen[d] = true
		}
		require.Greater(t, len(seen), 100, "retry %d is jittered", i+1)
	}
	// Far past the cap nothing overflows.
	require.LessOrEqual(t, p.backoff(attempts{n: 1000}), b.MaxDelay)
}

func TestBackoffHonoursRetryAfter(t *testing.T) {
	t.Parallel()
	m, err := newMetrics(nil)
	require.NoError(t, err)
	b := DefaultBudgets()[AiProviderInvocation] // 1s doubling, capped at 10s
	p := newPipeline(Key{Class: AiProviderInvocation, Instance: "a"}, b, ProviderClassifier{}, slog.New(slog.DiscardHandler), m)

	require.Equal(t, 30*time.Second, p.backoff(attempts{n: 1, last: askedToWait(30 * time.Second)}),
		"a longer wait the provider asked for is honoured beyond MaxDelay")
	d := p.backoff(attempts{n: 1, last: askedToWait(time.Millisecond)})
	require.GreaterOrEqual(t, d, b.BaseDelay/2, "a shorter one never shortens the backoff")
}
