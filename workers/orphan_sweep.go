package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/jobs"
)

// OrphanSweepInterval is how often the elected leader looks for work units
// whose process died.
const OrphanSweepInterval = 5 * time.Second

// OrphanGrace only absorbs clock differences between processes: a running
// job is covered by its process's liveness lock from the moment it is
// fetched (see package liveness), so only jobs fetched longer ago than this
// are swept.
const OrphanGrace = 2 * time.Second

// OrphanSweepWorker requeues account runs, folder passes and backfill
// batches whose process stopped while working them, so a crash costs
// seconds rather than River's hour-long stuck-job threshold; see package
// liveness.
type OrphanSweepWorker struct {
	river.WorkerDefaults[jobs.OrphanSweep]
	deps Dependencies
}

// Work implements river.Worker.
func (w *OrphanSweepWorker) Work(ctx context.Context, job *river.Job[jobs.OrphanSweep]) error {
	return SweepOrphans(ctx, w.deps, jobqueue.Logger(ctx, w.deps.Logger))
}

// SweepOrphans requeues the work units whose process stopped. Every process
// runs it once as it starts, so a restart reclaims its predecessor's work
// at once; the leader runs it periodically for processes that died while
// others went on.
func SweepOrphans(ctx context.Context, deps Dependencies, logger *slog.Logger) error {
	deps, err := deps.withDefaults()
	if err != nil {
		return err
	}
	// One statement that owns no transaction: the database pipeline's to
	// repeat when the database is briefly unreachable.
	key := resilience.Key{Class: resilience.DatabaseCommandExecution, Instance: resilience.SharedInstance}
	ids, err := resilience.Get(ctx, deps.Resilience, key, "orphan-sweep", func(ctx context.Context) ([]int64, error) {
		return liveness.Sweep(ctx, deps.Pool, []string{
			jobs.AccountRun{}.Kind(), jobs.FolderPass{}.Kind(), jobs.ReconcileWindow{}.Kind(), jobs.ExtractionBackfill{}.Kind(),
		}, OrphanGrace)
	})
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		logger.WarnContext(ctx, "requeued work units whose process stopped", slog.Int("jobs", len(ids)))
	}
	return nil
}

// PeriodicJobs are the jobs the elected leader inserts on a schedule.
func PeriodicJobs() []*river.PeriodicJob {
	return []*river.PeriodicJob{
		river.NewPeriodicJob(river.PeriodicInterval(OrphanSweepInterval),
			func() (river.JobArgs, *river.InsertOpts) { return jobs.OrphanSweep{}, nil },
			&river.PeriodicJobOpts{RunOnStart: true}),
	}
}
