package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/jobs"
)

// OrphanSweepInterval is how often the maintenance leader looks for work
// units whose process died.
const OrphanSweepInterval = 5 * time.Second

// OrphanGrace only absorbs clock differences between processes: a running
// job is covered by its process's liveness lock from the moment it is
// fetched (see package liveness), so only jobs fetched longer ago than this
// are swept.
const OrphanGrace = 2 * time.Second

// SweepOrphans requeues the jobs of every kind (jobs.Kinds) whose process
// stopped while working them — a job that holds no liveness lock of its
// own, such as an embed job, is covered by its process's — so a crash
// costs seconds rather than River's hour-long stuck-job threshold (see
// package liveness). Every process runs it once as it
// starts, so a restart reclaims its predecessor's work at once; the
// maintenance leader runs it periodically (Maintain) for processes that
// died while others went on.
func SweepOrphans(ctx context.Context, deps Dependencies, logger *slog.Logger) error {
	if !deps.built {
		return errNotBuilt
	}
	// One statement that owns no transaction: the database pipeline's to
	// repeat when the database is briefly unreachable.
	key := resilience.Key{Class: resilience.DatabaseCommandExecution, Instance: resilience.SharedInstance}
	ids, err := resilience.Get(ctx, deps.Resilience, key, "orphan-sweep", func(ctx context.Context) ([]int64, error) {
		return liveness.Sweep(ctx, deps.Pool, jobs.Kinds, jobqueue.MetadataCarriedBy, OrphanGrace)
	})
	if err != nil {
		return err
	}
	if len(ids) > 0 {
		logger.WarnContext(ctx, "requeued work units whose process stopped", slog.Int("jobs", len(ids)))
	}
	return nil
}
