package workers

import (
	"context"
	"fmt"
	"log/slog"
	"time"
)

// Maintain runs the housekeeping that keeps synchronization going, every
// OrphanSweepInterval until ctx ends, while leading reports that this
// process holds the maintenance leadership (liveness.ProcessLock.Leading):
// it requeues work whose process stopped (SweepOrphans).
//
// It is a loop of the leader's own rather than a periodic River job, so
// River UI lists synchronization and not a housekeeping row every few
// seconds. A failed round is logged by type and tried again at the next
// tick.
func Maintain(ctx context.Context, deps Dependencies, leading func() bool, logger *slog.Logger) {
	t := time.NewTicker(OrphanSweepInterval)
	defer t.Stop()
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
			logger.WarnContext(ctx, "the orphan sweep failed; it runs again at the next tick", slog.String("error_type", fmt.Sprintf("%T", err)))
		}
	}
}
