package mailstore

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestRetryDelay(t *testing.T) {
	t.Parallel()

	for attempt, ceiling := range map[int]time.Duration{
		1:  retryBaseDelay,
		2:  2 * retryBaseDelay,
		3:  4 * retryBaseDelay,
		10: retryMaxDelay,
		99: retryMaxDelay,
	} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := retryDelay(attempt)
			require.GreaterOrEqual(t, d, time.Millisecond, "attempt %d", attempt)
			require.LessOrEqual(t, d, ceiling+time.Millisecond, "attempt %d", attempt)
			seen[d] = true
		}
		require.Greater(t, len(seen), 1, "attempt %d: jittered", attempt)
	}
}
