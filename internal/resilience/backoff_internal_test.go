package resilience

import (
	"log/slog"
	"testing"
	"time"

	"github.com/failsafe-go/failsafe-go"
	"github.com/stretchr/testify/require"
)

// attempts is an ExecutionAttempt that only knows how many attempts ran.
type attempts struct {
	failsafe.ExecutionAttempt[any]
	n int
}

func (a attempts) Attempts() int { return a.n }

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
