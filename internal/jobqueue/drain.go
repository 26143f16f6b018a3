package jobqueue

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
)

// HardStopBound is how long Drain waits for cancelled jobs to return once
// the drain has expired. A worker that ignores its context past this is
// abandoned; its job is rescued by River later. Drain therefore returns at
// most drain + HardStopBound after it is called.
const HardStopBound = 5 * time.Second

// Drain stops client the way MailFathom shuts down: it stops fetching new
// jobs at once, gives the jobs already running drain to finish, and only
// then cancels what is still running. A drain of zero cancels at once. Jobs
// interrupted by the stop are returned to the queue by River without
// spending an attempt, and whatever they committed stays committed.
//
// Drain must return before the pool under client is closed: closing the
// pool first hangs.
func Drain(ctx context.Context, client *river.Client[pgx.Tx], drain time.Duration) error {
	if drain > 0 {
		softCtx, cancel := context.WithTimeout(ctx, drain)
		err := client.Stop(softCtx)
		cancel()
		if err == nil || !errors.Is(err, context.DeadlineExceeded) {
			return err
		}
	}
	hardCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), HardStopBound)
	defer cancel()
	return client.StopAndCancel(hardCtx)
}
