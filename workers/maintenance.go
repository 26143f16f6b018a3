package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
)

// Maintain runs the housekeeping that keeps synchronization going until
// ctx ends, while leading reports that this process holds the maintenance
// leadership (liveness.ProcessLock.Leading):
//
//   - every OrphanSweepInterval it requeues work whose process stopped
//     (SweepOrphans);
//   - at least twice per repair period — the shorter of
//     MAILFATHOM_SYNC_INTERVAL and a minute — it gives every configured
//     account that has no run coming one (RepairAccountRuns), so an
//     account_run cancelled or deleted in River UI, or discarded after its
//     attempts, never leaves its account unsynchronized until a restart.
//
// It is a loop of the leader's own rather than periodic River jobs, so
// River UI lists synchronization and not housekeeping rows. A failed round
// is logged by type and tried again at the next tick. client inserts the
// repaired runs; repaired, when set, counts them.
func Maintain(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx], leading func() bool, repaired prometheus.Counter, logger *slog.Logger) {
	t := time.NewTicker(OrphanSweepInterval)
	defer t.Stop()
	repairEvery := min(deps.Config.Sync.Interval, time.Minute) / 2
	var lastRepair time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !leading() {
			continue
		}
		if err := SweepOrphans(ctx, deps, logger); err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "the orphan sweep failed; it runs again at the next tick", slog.String("error_type", failure.Name(err)))
		}
		if time.Since(lastRepair) < repairEvery {
			continue
		}
		lastRepair = time.Now()
		n, err := RepairAccountRuns(ctx, deps, client, logger)
		if err != nil && ctx.Err() == nil {
			logger.WarnContext(ctx, "checking that every account has its next run failed; it is checked again at the next tick", slog.String("error_type", failure.Name(err)))
		}
		if repaired != nil && n > 0 {
			repaired.Add(float64(n))
		}
	}
}

// RepairAccountRuns schedules, through ScheduleAccountRun, a run now for
// every configured account that has none available, pending, retryable,
// running or scheduled, and logs each at Warning. An account in its run
// backoff waits it out when the run starts. It returns how many it
// scheduled; with synchronization disabled it does nothing.
func RepairAccountRuns(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx], logger *slog.Logger) (int, error) {
	if !deps.Config.Sync.Enabled || len(deps.Config.Accounts) == 0 {
		return 0, nil
	}
	pending, err := jobqueue.PendingAccounts(ctx, deps.Pool, jobs.AccountRun{}.Kind())
	if err != nil {
		return 0, err
	}
	repaired := 0
	for _, a := range deps.Config.Accounts {
		if pending[config.AccountKey(a.ID)] {
			continue
		}
		var inserted bool
		err := pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
			var err error
			inserted, err = ScheduleAccountRun(ctx, tx, client, a.ID, time.Now(), 0, 0)
			return err
		})
		if err != nil {
			return repaired, err
		}
		if inserted {
			repaired++
			logger.WarnContext(ctx, "the account had no next run (cancelled, deleted or discarded); one is scheduled now",
				slog.String("account", a.ID))
		}
	}
	return repaired, nil
}
