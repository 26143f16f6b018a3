package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/jobs"
)

// OrphanSweepInterval is how often the elected leader looks for work units
// whose process died.
const OrphanSweepInterval = 15 * time.Second

// orphanGrace is how long a job may run before its liveness lock is
// expected: the worker takes it within moments of starting.
const orphanGrace = 20 * time.Second

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
	ids, err := liveness.Sweep(ctx, w.deps.Pool, []string{jobs.AccountRun{}.Kind(), jobs.FolderPass{}.Kind(), jobs.ExtractionBackfill{}.Kind()}, orphanGrace)
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		jobqueue.Logger(ctx, w.deps.Logger).WarnContext(ctx, "requeued work units whose process stopped", slog.Int("jobs", len(ids)))
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
