package workers

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/accountrun"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/jobs"
)

// AccountRunWorker runs an account (accountrun.Run): it lists the
// account's folders once, resolves every configured alias against that
// listing, commits the bindings (with their mapping audit), and inserts one
// folder pass per resolved binding, the account's watch when it asks for
// push, and the account's next run, Interval later — or, when one of the
// account's unfinished mailbox mutations failed, on the run backoff — all
// in one transaction; then it carries the passes it inserted over the
// session it listed with (carryPasses), and completes.
//
// The worker claims the run's place in this process and in the job queue;
// the run's decisions are package accountrun's. An alias that resolves to
// no folder, or to several, is not a failed run: backing the account off
// would only slow the folders that work.
type AccountRunWorker struct {
	river.WorkerDefaults[jobs.AccountRun]
	deps Dependencies
}

// Timeout implements river.Worker: a listing is one command, but a slow
// server may take a while to answer a large hierarchy.
func (w *AccountRunWorker) Timeout(*river.Job[jobs.AccountRun]) time.Duration {
	return 10 * time.Minute
}

// NextRetry implements river.Worker with the run backoff.
func (w *AccountRunWorker) NextRetry(job *river.Job[jobs.AccountRun]) time.Time {
	s := w.deps.Config.Sync
	return w.deps.Now().Add(RunBackoff(s.Interval, s.MaxFailureBackoff, job.Args.FailuresBefore+job.Attempt))
}

// Work implements river.Worker: it claims what the run needs in this
// process — the end of a throttle, a place in the process's gate, the work
// connection — and hands the run itself to accountrun.Run.
func (w *AccountRunWorker) Work(ctx context.Context, job *river.Job[jobs.AccountRun]) error {
	cfg := w.deps.Config
	logger := jobqueue.Annotate(ctx, w.deps.Logger, slog.String("account", job.Args.AccountID))
	account, ok := cfg.Account(job.Args.AccountID)
	if !ok {
		logger.InfoContext(ctx, "account is no longer configured; its runs stop")
		return nil
	}
	if !cfg.Sync.Enabled {
		logger.InfoContext(ctx, "synchronization is disabled; the account's runs stop until it is enabled")
		return nil
	}

	// An account its server throttles asks nothing until the throttle
	// ends: the run waits as it is, neither failed nor begun.
	key := config.AccountKey(account.ID)
	if err := w.deps.waitOutThrottle(ctx, w.deps.Pool, key, logger); err != nil {
		return err
	}
	// A run waits in the process for a free account slot, so a thousand
	// due accounts do not each ask PostgreSQL for one over and over.
	leave, err := w.deps.enterGate(ctx, key, "", runGatePatience)
	if errors.Is(err, slots.ErrFull) {
		return river.JobSnooze(w.deps.deferral())
	}
	if err != nil {
		return err
	}
	defer func() { leave() }()

	conn, release, err := w.deps.acquireWorkConn(ctx, job.ID)
	if err != nil {
		return fmt.Errorf("account run: %w", err)
	}
	defer release()

	client := river.ClientFromContext[pgx.Tx](ctx)
	// The run goes on to the folder passes it schedules over the session
	// it lists the folders with (carryPasses): all of them, one after
	// another, where the account's folders are worked on one at a time
	// anyway; only the first where several may run at once, each over a
	// session of its own.
	var (
		listed *mailsession.Session
		kept   *slots.Held
		passes []accountrun.ScheduledPass
	)
	rep, err := accountrun.Run(ctx, w.deps.Pool, conn, accountrun.Options{
		Account:  account,
		Interval: cfg.Sync.Interval,
		Backoff: func(failures int) time.Duration {
			return RunBackoff(cfg.Sync.Interval, cfg.Sync.MaxFailureBackoff, failures)
		},
		Bounds:         bounds(cfg),
		CommitAttempts: cfg.Persistence.MaximumConcurrencyCommitAttempts,
		MaxMutations:   cfg.Sync.MaxMutationsPerConvergencePass,
		Stages:         w.deps.stages,
		Open: func(ctx context.Context) (accountrun.Session, error) {
			sess, err := w.deps.openMailbox(ctx, account, resilience.OperationFolderDiscovery)
			if err != nil {
				return nil, err
			}
			listed = sess
			return sess, nil
		},
		PassOpts: func(i int) *river.InsertOpts {
			if i > 0 && cfg.Sync.MaxConcurrentFoldersPerAccount > 1 {
				return nil
			}
			return jobqueue.Carried(job.ID)
		},
		Keep: func(_ accountrun.Session, held *slots.Held, scheduled []accountrun.ScheduledPass) {
			kept, passes = held, scheduled
		},
		Inserter: client,
		// The run's own job completes once the run has carried its passes:
		// River shows it running until then. Should the process stop
		// before, the run is attempted again, finds its next run
		// scheduled, and carries whatever passes are left.
		Finish: func(ctx context.Context, tx pgx.Tx, next time.Time, failuresBefore int) error {
			if err := scheduleWatch(ctx, tx, client, account); err != nil {
				return err
			}
			_, err := ScheduleAccountRun(ctx, tx, client, account.ID, next, failuresBefore, job.ID)
			return err
		},
		MailboxDone: leave,
		Now:         w.deps.Now,
	}, logger)
	if errors.Is(err, slots.ErrFull) {
		return river.JobSnooze(w.deps.deferral())
	}
	if err != nil {
		return err
	}
	logger.InfoContext(ctx, "account run finished",
		slog.Int("aliases", rep.Aliases), slog.Int("unresolved", rep.Unresolved),
		slog.Int("folder_passes_scheduled", rep.FolderPassesScheduled), slog.Duration("duration", rep.Duration),
		slog.Duration("next_run_in", rep.Next.Sub(w.deps.Now())))
	if kept != nil {
		c := w.deps.newCarrier(job.ID, conn, account)
		c.sess = listed
		c.carryPasses(ctx, kept, passes, logger)
		c.close()
		_ = kept.Release(context.WithoutCancel(ctx))
		leave()
	}
	return nil
}

// carryPasses runs, over the carrier's session and within the slots held
// (the account run's), each folder pass of passes the run inserted for
// the carrier to carry, in turn. A pass whose alias another unit works on,
// and every pass after the carrier stops (a failure, carryFor passed, a
// unit of the account waiting in the process's gate), is handed back to
// River.
func (c *carrier) carryPasses(ctx context.Context, held *slots.Held, passes []accountrun.ScheduledPass, logger *slog.Logger) {
	key := config.AccountKey(c.account.ID)
	goOn := true
	for i, p := range passes {
		if p.Duplicate || p.Job == nil || p.Job.State != rivertype.JobStatePending {
			continue // outstanding already, and River's
		}
		logger := logger.With(slog.String("alias", p.Alias))
		if goOn && i > 0 {
			goOn = c.more(ctx)
		}
		if !goOn {
			c.release(ctx, logger, c.deps.Now(), p.Job.ID)
			continue
		}
		goOn = c.carry(ctx, p.Job, logger, func(ctx context.Context, job unitJob) error {
			logger := jobqueue.Logger(ctx, logger)
			if err := held.TakeAlias(ctx, key, p.Alias); err != nil {
				if errors.Is(err, slots.ErrFull) {
					// Another unit works on the folder: the pass waits
					// as any unit meeting a full bound does.
					return river.JobSnooze(c.deps.deferral())
				}
				return err
			}
			defer func() { _ = held.DropAlias(context.WithoutCancel(ctx)) }()
			unit, err := c.deps.carriedUnit(ctx, c.conn, c.account, p.Alias, logger)
			if unit == nil {
				if err == nil {
					return job.completeNow(ctx, c.conn, nil)
				}
				return err
			}
			return c.pass(ctx, unit, job, logger)
		})
	}
}

// scheduleAfterFailure is what follows an account run that failed
// permanently (the failure middleware's reaction): the account's next run
// is scheduled on the run backoff, so the account keeps being tried for as
// long as it is configured — once per run, so a rejected password is tried
// once per run and never in a loop.
func scheduleAfterFailure(deps Dependencies) func(context.Context, *rivertype.JobRow, error) error {
	return func(ctx context.Context, row *rivertype.JobRow, _ error) error {
		var args jobs.AccountRun
		if err := json.Unmarshal(row.EncodedArgs, &args); err != nil {
			return fmt.Errorf("account run: decode its arguments: %w", err)
		}
		cfg := deps.Config
		failures := args.FailuresBefore + row.Attempt
		wait := RunBackoff(cfg.Sync.Interval, cfg.Sync.MaxFailureBackoff, failures)
		client := river.ClientFromContext[pgx.Tx](ctx)
		err := pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
			_, err := ScheduleAccountRun(ctx, tx, client, args.AccountID, deps.Now().Add(wait), failures, row.ID)
			return err
		})
		if err != nil {
			return err
		}
		jobqueue.Logger(ctx, deps.Logger).WarnContext(ctx, "the account's next run follows the backoff",
			slog.Int("consecutive_failures", failures), slog.Duration("next_run_in", wait))
		return nil
	}
}

func bounds(cfg *config.Config) slots.Bounds {
	return slots.Bounds{MaxAccounts: cfg.Sync.MaxConcurrentAccounts, MaxFoldersPerAccount: cfg.Sync.MaxConcurrentFoldersPerAccount}
}
