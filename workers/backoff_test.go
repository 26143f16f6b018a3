package workers

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRunBackoff(t *testing.T) {
	t.Parallel()
	low := func() float64 { return 0 }
	high := func() float64 { return 0.999999 }
	const interval, ceiling = 5 * time.Minute, 30 * time.Minute

	cases := []struct {
		failures int
		min, max time.Duration
	}{
		{0, interval, interval},
		{1, 8 * time.Minute, 10 * time.Minute},
		{2, 16 * time.Minute, 20 * time.Minute},
		{3, 24 * time.Minute, 30 * time.Minute},
		{10, 24 * time.Minute, 30 * time.Minute},
		{1000, 24 * time.Minute, 30 * time.Minute},
	}
	for _, tc := range cases {
		require.Equal(t, tc.min, runBackoff(interval, ceiling, tc.failures, low), "failures %d", tc.failures)
		require.InDelta(t, float64(tc.max), float64(runBackoff(interval, ceiling, tc.failures, high)), float64(time.Millisecond), "failures %d", tc.failures)
	}

	// A ceiling equal to the interval means no backoff at all.
	for f := range 5 {
		require.Equal(t, interval, runBackoff(interval, interval, f, high))
	}
	// Never below the interval, whatever the jitter draws.
	require.GreaterOrEqual(t, runBackoff(10*time.Second, 11*time.Second, 1, low), 10*time.Second)
}
