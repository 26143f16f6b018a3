package workers

import (
	"testing"
	"time"

	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/jobs"
)

// TestEmbedRetryIsCapped: an embed job that failed is attempted again on
// River's schedule while that is short, and within maxEmbedRetryDelay once
// River's would wait longer, so a provider back from an outage is used
// soon by the jobs that failed against it.
func TestEmbedRetryIsCapped(t *testing.T) {
	t.Parallel()
	now := time.Now()
	w := &EmbedEmailWorker{deps: Dependencies{Now: func() time.Time { return now }}}
	for attempt := 1; attempt <= 20; attempt++ {
		// River's schedule counts the errors the job recorded.
		job := &river.Job[jobs.EmbedEmail]{JobRow: &rivertype.JobRow{Attempt: attempt, AttemptedAt: &now,
			Errors: make([]rivertype.AttemptError, attempt)}}
		wait := w.NextRetry(job).Sub(now)
		require.Positive(t, wait, "attempt %d", attempt)
		require.LessOrEqual(t, wait, maxEmbedRetryDelay, "attempt %d", attempt)
		if attempt >= 3 {
			require.GreaterOrEqual(t, wait, maxEmbedRetryDelay/2, "attempt %d", attempt)
		}
	}
}
