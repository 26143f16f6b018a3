package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/push"
	"github.com/mailfathom/mailfathom/jobs"
)

// WatchWorker holds one push account's watch (jobs.Watch, package push):
// it checks that the account still asks for push, runs one attempt of the
// watch, and turns how the attempt ended into the job's next state. An
// attempt that re-arms, or ends as the process stops, snoozes to come back
// at once as the same row on whichever process fetches it next; one whose
// account no run has resolved the folders of yet snoozes briefly; one
// degraded to polling snoozes for the degradation period.
//
// The worker does not watch, count failures or queue passes itself.
type WatchWorker struct {
	river.WorkerDefaults[jobs.Watch]
	deps Dependencies
}

// Timeout implements river.Worker: the watch bounds itself (its lifetime,
// extended only by a degradation, itself at most a day).
func (w *WatchWorker) Timeout(*river.Job[jobs.Watch]) time.Duration {
	return w.deps.watchLifetime() + 25*time.Hour
}

// NextRetry implements river.Worker: a watch whose attempt failed outside
// the failures it counts itself (the database, say) is tried again soon.
func (w *WatchWorker) NextRetry(*river.Job[jobs.Watch]) time.Time {
	return w.deps.Now().Add(w.deps.deferral())
}

// Work implements river.Worker.
func (w *WatchWorker) Work(ctx context.Context, job *river.Job[jobs.Watch]) error {
	cfg := w.deps.Config
	logger := jobqueue.Annotate(ctx, w.deps.Logger, slog.String("account", job.Args.AccountID))
	account, ok := cfg.Account(job.Args.AccountID)
	if !ok || !cfg.Sync.Enabled || account.Mode != config.ModePush {
		logger.InfoContext(ctx, "the account no longer asks for push synchronization; its watch ends")
		return nil
	}
	// Shutting down ends the watch at once, rather than after the drain
	// timeout: it holds no work that could be lost.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if w.deps.Stopping != nil {
		go func() {
			select {
			case <-w.deps.Stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	s := cfg.Sync
	end, err := push.Run(ctx, account, push.Limits{
		MaxSubscribedFolders:   s.MaxSubscribedFolders,
		RenewalInterval:        s.PushRenewalInterval,
		MaxConsecutiveFailures: s.MaxConsecutivePushFailures,
		DegradationPeriod:      s.PushDegradationPeriod,
	}, push.Options{
		Pool: w.deps.Pool,
		Env:  w.deps.endpointEnv(),
		Open: w.deps.OpenWatch,
		QueuePass: func(ctx context.Context, tx pgx.Tx, pass jobs.FolderPass) (bool, error) {
			res, err := river.ClientFromContext[pgx.Tx](ctx).InsertTx(ctx, tx, pass, nil)
			if err != nil {
				return false, err
			}
			return res.UniqueSkippedAsDuplicate, nil
		},
		Resolutions: w.deps.resolutions,
		Metrics:     w.deps.Push,
		Now:         w.deps.Now,
		Lifetime:    w.deps.watchLifetime(),
		Logger:      logger,
	})
	if ctx.Err() != nil {
		// Stopping, or the attempt's own end: come back at once, on
		// whichever process fetches the row.
		return river.JobSnooze(0)
	}
	if err != nil {
		return err
	}
	switch end.Reason {
	case push.Unbound:
		return river.JobSnooze(w.deps.deferral())
	case push.Polling:
		return river.JobSnooze(end.For)
	default:
		return river.JobSnooze(0)
	}
}
