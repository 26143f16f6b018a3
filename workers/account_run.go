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
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/folders"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/jobs"
)

// AccountRunWorker runs an account: it lists the account's folders once,
// resolves every configured alias against that listing, commits the
// bindings (with their mapping audit rows), and inserts one folder pass per
// resolved binding and the account's next run, Interval later — or, when
// one of the account's unfinished mailbox mutations failed, on the run
// backoff — all in one transaction with the run's own completion.
//
// An alias that resolves to no folder, or to several, costs that folder
// alone and is not a failed run: it is a configuration mistake, logged as a
// warning naming the alias, and backing the account off would only slow
// the folders that work.
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

// audit is one binding change, logged after the transaction that made it
// committed.
type audit struct {
	change   mailstore.BindingChange
	binding  mailstore.Binding
	previous *mailstore.Binding
}

// Work implements river.Worker.
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

	// The run settles the previous one: failed folders count against the
	// account as a failed account run does.
	var state mailstore.AccountState
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		state, err = mailstore.BeginRun(ctx, tx, key, w.deps.Now())
		return err
	})
	if err != nil {
		return err
	}

	held, err := slots.Acquire(ctx, conn, key, "", bounds(cfg))
	if errors.Is(err, slots.ErrFull) {
		return river.JobSnooze(w.deps.deferral())
	}
	if err != nil {
		return err
	}
	defer func() { _ = held.Release(context.WithoutCancel(ctx)) }()

	start := w.deps.Now()
	// Unfinished changes are taken in hand before any folder is touched.
	mutationFailed, err := w.deps.convergeMutations(ctx, logger, key)
	if err != nil {
		return err
	}
	// A change that failed failed this run, which the next run counts: the
	// next run follows the backoff a failing folder's pass earns the
	// account, so a change that keeps failing spends its attempts at that
	// spacing rather than the interval's.
	next, failuresBefore := w.deps.Now().Add(cfg.Sync.Interval), state.ConsecutiveFailures
	if mutationFailed {
		failuresBefore++
		next = state.RunStartedAt.Add(RunBackoff(cfg.Sync.Interval, cfg.Sync.MaxFailureBackoff, failuresBefore))
	}
	resolutions, err := w.discover(ctx, account)
	// The mailbox work is done: give the slots back before scheduling the
	// folder passes, which need them.
	_ = held.Release(ctx)
	leave()
	if err != nil {
		return err
	}

	client := river.ClientFromContext[pgx.Tx](ctx)
	var audits []audit
	var passes int
	err = mailstore.RetryConflicts(ctx, w.deps.Pool, cfg.Persistence.MaximumConcurrencyCommitAttempts, func(ctx context.Context, tx pgx.Tx) error {
		audits, passes = nil, 0
		accountID, err := mailstore.EnsureAccount(ctx, tx, config.AccountKey(account.ID))
		if err != nil {
			return err
		}
		var inserts []river.InsertManyParams
		resolved := make([]mailstore.Resolution, 0, len(resolutions))
		for _, r := range resolutions {
			if r.Err != nil {
				resolved = append(resolved, mailstore.Resolution{Alias: r.Alias, Failure: failure.Name(r.Err)})
				continue
			}
			b, change, prev, err := mailstore.CommitBinding(ctx, tx, accountID, r.Alias, r.Remote.Path, r.Remote.Delimiter)
			if err != nil {
				return err
			}
			resolved = append(resolved, mailstore.Resolution{Alias: r.Alias, BindingID: b.ID})
			if change != mailstore.BindingUnchanged {
				audits = append(audits, audit{change: change, binding: b, previous: prev})
			}
			inserts = append(inserts, river.InsertManyParams{Args: jobs.FolderPass{AccountID: account.ID, Alias: r.Alias}})
		}
		if len(inserts) > 0 {
			res, err := client.InsertManyTx(ctx, tx, inserts)
			if err != nil {
				return fmt.Errorf("account run: schedule folder passes: %w", err)
			}
			for _, r := range res {
				if !r.UniqueSkippedAsDuplicate {
					passes++
				}
			}
		}
		// What a push account's watch watches: what this run resolved.
		if _, err := mailstore.RecordResolutions(ctx, tx, key, resolved); err != nil {
			return err
		}
		if err := scheduleWatch(ctx, tx, client, account); err != nil {
			return err
		}
		if _, err := ScheduleAccountRun(ctx, tx, client, account.ID, next, failuresBefore, job.ID); err != nil {
			return err
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}

	for _, a := range audits {
		logMappingChange(ctx, logger, a)
	}
	unresolved := 0
	for _, r := range resolutions {
		if r.Err != nil {
			unresolved++
			logger.WarnContext(ctx, "folder alias did not resolve; that folder is skipped this run",
				slog.String("alias", r.Alias), slog.String("failure", failure.Name(r.Err)), slog.String("error", r.Err.Error()))
		}
	}
	logger.InfoContext(ctx, "account run finished",
		slog.Int("aliases", len(resolutions)), slog.Int("unresolved", unresolved),
		slog.Int("folder_passes_scheduled", passes), slog.Duration("duration", w.deps.Now().Sub(start)),
		slog.Duration("next_run_in", next.Sub(w.deps.Now())))
	return nil
}

// discover lists the account's folders over one read-only session and
// resolves every configured alias.
func (w *AccountRunWorker) discover(ctx context.Context, account config.Account) ([]folders.Resolution, error) {
	sess, err := w.deps.openMailbox(ctx, account, resilience.OperationFolderDiscovery)
	if err != nil {
		return nil, err
	}
	listing, err := sess.ListFolders(ctx)
	closeErr := sess.Close()
	if err != nil {
		return nil, err
	}
	_ = closeErr // the listing is complete; a failed logout changes nothing
	catalog := make([]folders.Remote, len(listing))
	for i, f := range listing {
		catalog[i] = folders.Remote{Path: f.Path, Delimiter: f.Delimiter, Attributes: f.Attributes}
	}
	mappings := make([]folders.Mapping, len(account.Folders))
	for i, f := range account.Folders {
		mappings[i] = folders.Mapping{Alias: f.Alias, RemotePath: f.RemotePath, SpecialUse: string(f.SpecialUse)}
	}
	return folders.Resolve(mappings, catalog), nil
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

// logMappingChange writes the mapping audit record: the one log line that
// names remote folder paths. A first binding is information; a repointed
// alias is a warning, because mail is now read from another folder.
func logMappingChange(ctx context.Context, logger *slog.Logger, a audit) {
	attrs := []any{
		slog.String("alias", a.binding.Alias),
		slog.Int("generation", a.binding.Generation),
		slog.String("remote_path", a.binding.RemotePath),
	}
	if a.change == mailstore.BindingRepointed && a.previous != nil {
		attrs = append(attrs, slog.String("previous_remote_path", a.previous.RemotePath),
			slog.Int("previous_generation", a.previous.Generation))
		logger.WarnContext(ctx, "folder alias repointed to another remote folder; a new generation starts from its first UID", attrs...)
		return
	}
	logger.InfoContext(ctx, "folder alias bound", attrs...)
}

func bounds(cfg *config.Config) slots.Bounds {
	return slots.Bounds{MaxAccounts: cfg.Sync.MaxConcurrentAccounts, MaxFoldersPerAccount: cfg.Sync.MaxConcurrentFoldersPerAccount}
}
