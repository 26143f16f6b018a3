package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/jobs"
)

// ScheduleAccountRun inserts the next run of account at at, in tx, unless a
// run of the account other than exclude (the job doing the scheduling, or 0)
// is already pending, scheduled, retrying or running. It reports whether it
// inserted one.
func ScheduleAccountRun(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], accountID string, at time.Time, failuresBefore int, exclude int64) (bool, error) {
	key := config.AccountKey(accountID)
	if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleAccountRuns, key); err != nil {
		return false, err
	}
	pending, err := jobqueue.Pending(ctx, tx, jobs.AccountRun{}.Kind(), key, exclude)
	if err != nil {
		return false, err
	}
	if pending {
		return false, nil
	}
	opts := &river.InsertOpts{}
	if at.After(time.Now()) {
		// A time given for now would make River store the job as scheduled
		// and wait for its scheduler's next tick; leaving it out makes the
		// run available at once.
		opts.ScheduledAt = at
	}
	_, err = client.InsertTx(ctx, tx, jobs.AccountRun{AccountID: accountID, FailuresBefore: failuresBefore}, opts)
	if err != nil {
		return false, fmt.Errorf("schedule account run: insert: %w", err)
	}
	return true, nil
}

// ScheduleConfiguredAccounts makes sure every configured account has a run
// pending, starting now for an account that has none. It is what starts
// synchronization at startup and picks up an account added to the
// configuration; an account removed from it ends its own runs.
func ScheduleConfiguredAccounts(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx]) (int, error) {
	if !deps.Config.Sync.Enabled {
		return 0, nil
	}
	inserted := 0
	for _, a := range deps.Config.Accounts {
		err := pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
			ok, err := ScheduleAccountRun(ctx, tx, client, a.ID, time.Now(), 0, 0)
			if ok {
				inserted++
			}
			return err
		})
		if err != nil {
			return inserted, err
		}
	}
	return inserted, nil
}
