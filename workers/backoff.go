package workers

import (
	"math/rand/v2"
	"time"

	"github.com/mailfathom/mailfathom/internal/status"
)

// RunBackoff is the wait before an account's next run after failures
// consecutive failed runs: it grows from interval, doubling once per
// failure, is capped at maxBackoff, and is drawn from the upper fifth of
// that range so accounts sharing a server do not return to it in the same
// instant. It is never shorter than interval, so a cap equal to the
// interval means no backoff at all. Zero failures is the interval itself.
func RunBackoff(interval, maxBackoff time.Duration, failures int) time.Duration {
	return runBackoff(interval, maxBackoff, failures, rand.Float64)
}

// MinRunBackoff is the shortest wait RunBackoff can draw for failures: the
// earliest an account's next run may start after that many failed runs.
func MinRunBackoff(interval, maxBackoff time.Duration, failures int) time.Duration {
	return runBackoff(interval, maxBackoff, failures, func() float64 { return 0 })
}

func runBackoff(interval, maxBackoff time.Duration, failures int, random func() float64) time.Duration {
	if failures <= 0 {
		return interval
	}
	d := interval
	for i := 0; i < failures && d < maxBackoff; i++ {
		d *= 2
	}
	d = min(d, max(maxBackoff, interval))
	lo := max(interval, d-d/5)
	if d <= lo {
		return d
	}
	return lo + time.Duration(random()*float64(d-lo))
}

// StatusOptions returns what package status needs to read deps' accounts:
// the configuration and the run backoff.
func StatusOptions(deps Dependencies) status.Options {
	cfg := deps.Config
	return status.Options{
		Config: cfg,
		Backoff: func(failures int) time.Duration {
			return MinRunBackoff(cfg.Sync.Interval, cfg.Sync.MaxFailureBackoff, failures)
		},
		Now: deps.Now,
	}
}
