package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/jobs"
)

// MutationStageWorker carries one stage of a mailbox mutation over the
// account's write connection (package mutation). A job whose stage the
// record has already left does nothing; a stage another worker carries, or
// whose account's write connection another process holds, is deferred; a
// failed stage is recorded against the account's run and waits for its
// next run, which converges it.
type MutationStageWorker struct {
	river.WorkerDefaults[jobs.MutationStage]
	deps Dependencies
}

// Timeout implements river.Worker: one stage is one command, plus a
// connection when none is open.
func (w *MutationStageWorker) Timeout(*river.Job[jobs.MutationStage]) time.Duration {
	return 5 * time.Minute
}

// Work implements river.Worker.
func (w *MutationStageWorker) Work(ctx context.Context, job *river.Job[jobs.MutationStage]) error {
	id, err := uuid.Parse(job.Args.MutationID)
	if err != nil {
		return river.JobCancel(fmt.Errorf("mutation stage: the mutation id is not a UUID: %w", err))
	}
	m, found, err := mailstore.ReadMutation(ctx, w.deps.Pool, id)
	switch {
	case err != nil:
		return err
	case !found, m.State.Final(), string(m.Stage) != job.Args.Stage, m.Stage == mailstore.StagePlacementIssued:
		// Finished, removed with its email, advanced by someone else
		// (who inserted the job of the stage it reached), or waiting for
		// an observation that only synchronization makes.
		return nil
	}
	// The job's lines name the mutation, so one change can be followed
	// through its stages in the log.
	logger := jobqueue.Annotate(ctx, w.deps.Logger, slog.String("account", m.AccountKey),
		slog.String("mutation", m.ID.String()), slog.String("stage", string(m.Stage)))
	if _, ok := configuredAccount(w.deps.Config, m.AccountKey); !ok {
		logger.InfoContext(ctx, "the mutation's account is no longer configured; it is not carried")
		return nil
	}
	// The job's liveness lock: a process that dies while carrying the
	// stage has the job handed back by the orphan sweep at once.
	_, release, err := w.deps.acquireWorkConn(ctx, job.ID)
	if err != nil {
		return fmt.Errorf("mutation stage: %w", err)
	}
	defer release()
	_, err = w.deps.stages.Step(ctx, id, false)
	if errors.Is(err, mutation.ErrBusy) {
		return river.JobSnooze(w.deps.deferral())
	}
	return err
}

// recordMutationFailure records a failed stage against the account's
// current run (recordUnitFailure).
func recordMutationFailure(deps Dependencies) func(context.Context, *rivertype.JobRow, error) error {
	return recordUnitFailure(deps, func(ctx context.Context, tx pgx.Tx, key, _ string, failed error) (mailstore.AccountState, bool, error) {
		if err := mailstore.FailRun(ctx, tx, key, failure.Name(failed), deps.Now()); err != nil {
			return mailstore.AccountState{}, false, err
		}
		st, _, err := mailstore.ReadAccountState(ctx, tx, key)
		return st, false, err
	})
}

// newMutationStages builds the process's write connections and the
// stages over them.
func newMutationStages(d Dependencies) (*mutation.Connections, *mutation.Stages, error) {
	conns, err := mutation.NewConnections(mutation.ConnectionsConfig{
		Pool:       d.Pool,
		Registry:   d.Resilience,
		IdlePeriod: d.Config.Sync.WriteConnectionIdlePeriod,
		Logger:     d.Logger,
		Open: func(ctx context.Context, accountKey string) (*imapx.WriteConnection, error) {
			account, ok := configuredAccount(d.Config, accountKey)
			if !ok {
				return nil, errors.New("workers: the mutation's account is not configured")
			}
			ep, err := mailendpoint.Endpoint(ctx, account, d.endpointEnv())
			if err != nil {
				return nil, err
			}
			return d.OpenWriteConnection(ctx, ep)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	stages, err := mutation.NewStages(mutation.StagesConfig{
		Pool:                d.Pool,
		Connections:         conns,
		MaxAttempts:         d.Config.Sync.MaxMutationAttempts,
		UnknownOutcomeGrace: d.Config.Sync.UnknownMutationOutcomeGrace,
		Now:                 d.Now,
		Logger:              d.Logger,
		Disposition: func(accountKey string) mailstore.Disposition {
			if a, ok := configuredAccount(d.Config, accountKey); ok && a.RemotelyDeletedEmailDisposition == config.EraseLocalCopy {
				return mailstore.EraseLocalCopy
			}
			return mailstore.RetainTombstone
		},
		Next: func(ctx context.Context, tx pgx.Tx, m mailstore.Mutation) error {
			account, ok := configuredAccount(d.Config, m.AccountKey)
			if !ok {
				return nil
			}
			client, err := river.ClientFromContextSafely[pgx.Tx](ctx)
			if err != nil {
				return fmt.Errorf("workers: schedule the next mutation stage: %w", err)
			}
			return mutation.Schedule(ctx, tx, client, account.ID, m)
		},
	})
	if err != nil {
		return nil, nil, err
	}
	return conns, stages, nil
}

func configuredAccount(cfg *config.Config, key string) (config.Account, bool) {
	for _, a := range cfg.Accounts {
		if config.AccountKey(a.ID) == key {
			return a, true
		}
	}
	return config.Account{}, false
}
