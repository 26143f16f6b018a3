package workers

import (
	"context"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
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

// RestartGrace is how long after an account's last run started a process
// start waits before running it again, so a process that keeps crashing
// and restarting does not hammer a server that counts failed logins.
const RestartGrace = time.Minute

// ScheduleConfiguredAccounts is what starting a process means for
// synchronization: an operator asking for work now. Every configured
// account's failed runs are forgotten and its next run becomes due at once
// — or, when its last run started less than RestartGrace ago, once that
// has passed, and when its server throttles it, once the throttle ends —
// whether it was waiting out its interval, its backoff or a retry, or had
// no run at all. It returns how many accounts it made due.
// An account removed from the configuration ends its own runs.
func ScheduleConfiguredAccounts(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx]) (int, error) {
	if !deps.Config.Sync.Enabled {
		return 0, nil
	}
	if !deps.built {
		return 0, errNotBuilt
	}
	due := 0
	for _, a := range deps.Config.Accounts {
		key := config.AccountKey(a.ID)
		err := scheduleConfiguredAccount(ctx, deps.Pool, func(tx pgx.Tx) error {
			if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleAccountRuns, key); err != nil {
				return err
			}
			started, err := mailstore.ClearFailures(ctx, tx, key)
			if err != nil {
				return err
			}
			at := deps.Now()
			if started != nil && at.Sub(*started) < RestartGrace {
				at = started.Add(RestartGrace)
			}
			// A throttle outlives the process: a start does not make the
			// account ask its server sooner than it was told to.
			if th, throttled, err := mailstore.ActiveThrottle(ctx, tx, key, deps.Now()); err != nil {
				return err
			} else if throttled && th.Until.After(at) {
				at = th.Until
			}
			moved, err := jobqueue.RescheduleAccountRun(ctx, tx, jobs.AccountRun{}.Kind(), key, at)
			if err != nil || moved {
				due++
				return err
			}
			inserted, err := ScheduleAccountRun(ctx, tx, client, a.ID, at, 0, 0)
			if inserted {
				due++
			}
			if err != nil {
				return err
			}
			return scheduleWatch(ctx, tx, client, a)
		})
		if err != nil {
			return due, err
		}
	}
	return due, nil
}

// scheduleAttempts bounds how often one account's start-up scheduling
// runs again after PostgreSQL rolled it back.
const scheduleAttempts = 5

// scheduleConfiguredAccount runs fn in a transaction, and again, up to
// scheduleAttempts in all, when PostgreSQL rolled it back to be run again:
// replicas starting together schedule the same accounts while their runs
// are under way, and the lock orders of those paths can meet in a
// deadlock that PostgreSQL breaks by rolling one back. fn is idempotent: it
// clears the failures and makes the one run due.
func scheduleConfiguredAccount(ctx context.Context, pool *pgxpool.Pool, fn func(tx pgx.Tx) error) error {
	for attempt := 1; ; attempt++ {
		err := pgx.BeginFunc(ctx, pool, fn)
		if err == nil || attempt == scheduleAttempts || !database.RolledBackToRunAgain(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Duration(attempt) * 50 * time.Millisecond):
		}
	}
}

// scheduleWatch inserts account's watch, in tx, when the account asks for
// push synchronization and has none pending or running (the watch is
// unique per account, so a second insert is skipped).
func scheduleWatch(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx], account config.Account) error {
	if account.Mode != config.ModePush {
		return nil
	}
	if _, err := client.InsertTx(ctx, tx, jobs.Watch{AccountID: account.ID}, nil); err != nil {
		return fmt.Errorf("schedule the account's watch: %w", err)
	}
	return nil
}
