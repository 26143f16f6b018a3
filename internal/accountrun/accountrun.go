// Package accountrun runs an account: it begins the account's run, carries
// its unfinished mailbox mutations a stage forward, lists its folders once
// over a read-only session, resolves every configured alias against that
// listing, and commits the bindings (with their mapping audit), the folder
// pass of every resolved binding and what the caller schedules after the
// run, all in one transaction.
//
// An alias that resolves to no folder, or to several, costs that folder
// alone and is not a failed run: it is a configuration mistake, logged as a
// warning naming the alias and counted in the Report.
//
// The package holds the run's decisions, not its place in the job queue:
// it does not wait out a throttle, claim the process's concurrency gate,
// decide a retry or complete a job. The caller (the account run worker)
// does, and hands in through Options how the run's jobs are inserted; with
// Options.Keep it takes over the run's session and slots once the run has
// committed, to go on to the folder passes over them.
//
// It sits beside packages forwardpass and backwardpass, whose passes the
// run schedules.
package accountrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/jobs"
)

// DB is the application database: the run's final transaction and the
// mutation convergence use it.
type DB interface {
	mailstore.TxBeginner
	mailstore.Querier
}

// Inserter is the part of a River client the run inserts its folder passes
// with; *river.Client[pgx.Tx] implements it.
type Inserter interface {
	InsertManyTx(ctx context.Context, tx pgx.Tx, params []river.InsertManyParams) ([]*rivertype.JobInsertResult, error)
}

// Options configure one run. Run fills the defaults and validates once.
type Options struct {
	// Account is the configured account the run runs. Required.
	Account config.Account
	// Interval is MAILFATHOM_SYNC_INTERVAL: a run after which no mutation
	// failed is followed by the next this long after the mailbox work.
	// Required.
	Interval time.Duration
	// Backoff returns the wait before the next run after failures
	// consecutive failed runs, counted from when this run began; it spaces
	// the next run when a mutation failed. Required.
	Backoff func(failures int) time.Duration
	// Bounds are MaxConcurrentAccounts and MaxConcurrentFoldersPerAccount:
	// the run holds an account slot and a folder slot under them while it
	// works on the mailbox. Required (slots.Acquire refuses bounds out of
	// range).
	Bounds slots.Bounds
	// CommitAttempts is MaximumConcurrencyCommitAttempts: how often the
	// final transaction is attempted when another got in its way. Default
	// 1.
	CommitAttempts int
	// MaxMutations is MaxMutationsPerConvergencePass: the unfinished
	// mutations one run carries forward. Required.
	MaxMutations int
	// Stages carries each unfinished mutation a stage forward. Required.
	Stages Stepper
	// Open opens the read-only session the folders are listed over.
	// Required.
	Open func(ctx context.Context) (Session, error)
	// Inserter inserts the folder passes, in the final transaction.
	// Required.
	Inserter Inserter
	// Finish runs last in the final transaction with the next run's time
	// and the failures it counts before it: where the caller schedules the
	// next run (and may complete its own job). Required.
	Finish func(ctx context.Context, tx pgx.Tx, next time.Time, failuresBefore int) error
	// MailboxDone, when set, is called once the mailbox work is done and
	// the run's slots are given back, before the folder passes are
	// scheduled (they need the slots); it is where the caller leaves its
	// process's gate. Default: nil, nothing is called. It is not called
	// when Keep takes the slots.
	MailboxDone func()
	// PassOpts, when set, returns the insert options of the i-th folder
	// pass the run schedules, in configuration order (nil: the pass's
	// own); the caller inserts the passes it will carry with
	// jobqueue.Carried. Default: nil, every pass as it is.
	PassOpts func(i int) *river.InsertOpts
	// Keep, when set, takes over, once the final transaction committed,
	// the session the folders were listed over, the slots the run holds
	// and the folder passes it scheduled, so the caller can go on to them
	// over the same session without another login: it then closes the
	// session and releases the slots (and leaves its process's gate). A run
	// that fails before that closes and releases them itself. Default:
	// nil, the session is closed once listed and the slots released before
	// the passes are scheduled.
	Keep func(sess Session, held *slots.Held, passes []ScheduledPass)
	// Now is the clock. Default: time.Now.
	Now func() time.Time
}

// withDefaults returns opts with every default filled, or an error naming
// the first required field missing.
func (opts Options) withDefaults() (Options, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	switch {
	case opts.Account.ID == "":
		return opts, errors.New("accountrun: Options.Account is required")
	case opts.Interval <= 0:
		return opts, errors.New("accountrun: Options.Interval must be positive")
	case opts.Backoff == nil:
		return opts, errors.New("accountrun: Options.Backoff is required")
	case opts.MaxMutations < 1:
		return opts, errors.New("accountrun: Options.MaxMutations must be positive")
	case opts.Stages == nil:
		return opts, errors.New("accountrun: Options.Stages is required")
	case opts.Open == nil:
		return opts, errors.New("accountrun: Options.Open is required")
	case opts.Inserter == nil:
		return opts, errors.New("accountrun: Options.Inserter is required")
	case opts.Finish == nil:
		return opts, errors.New("accountrun: Options.Finish is required")
	}
	return opts, nil
}

// ScheduledPass is a folder pass a run inserted.
type ScheduledPass struct {
	Alias string
	// Job is the inserted job, or the one already outstanding when the
	// insert was a duplicate.
	Job       *rivertype.JobRow
	Duplicate bool
}

// Report is what a run did, in counts: no folder path or alias.
type Report struct {
	// Aliases counts the configured aliases the run resolved.
	Aliases int `json:"aliases"`
	// Unresolved counts the aliases that resolved to no folder or to
	// several, and whose folders the run skipped.
	Unresolved int `json:"unresolved"`
	// FolderPassesScheduled counts the folder passes the run inserted; one
	// already pending is not counted.
	FolderPassesScheduled int `json:"folder_passes_scheduled"`
	// Mutations is what the convergence did.
	Mutations Convergence `json:"mutations"`
	// Next is when the next run is scheduled, and FailuresBefore the
	// failed runs it counts before it.
	Next           time.Time `json:"next"`
	FailuresBefore int       `json:"failures_before"`
	// Duration is the run's time from taking its slots to its commit.
	Duration time.Duration `json:"duration_ns"`
}

// Run runs account opts.Account. conn is the connection the caller holds
// for the run: the run begins on it and holds its slots through it. A run
// that finds the account's slots taken returns an error that is
// slots.ErrFull, which the caller defers rather than fails.
func Run(ctx context.Context, db DB, conn *pgxpool.Conn, opts Options, logger *slog.Logger) (rep Report, err error) {
	opts, err = opts.withDefaults()
	if err != nil {
		return rep, err
	}
	key := config.AccountKey(opts.Account.ID)

	// The run settles the previous one: failed folders count against the
	// account as a failed account run does.
	var state mailstore.AccountState
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		var err error
		state, err = mailstore.BeginRun(ctx, tx, key, opts.Now())
		return err
	})
	if err != nil {
		return rep, err
	}

	held, err := slots.Acquire(ctx, conn, key, "", opts.Bounds)
	if err != nil {
		return rep, err
	}
	var kept Session
	defer func() {
		if held == nil {
			return // Keep took them over
		}
		_ = held.Release(context.WithoutCancel(ctx))
		if kept != nil {
			_ = kept.Close()
		}
		if opts.Keep != nil && opts.MailboxDone != nil {
			opts.MailboxDone()
		}
	}()

	start := opts.Now()
	defer func() { rep.Duration = opts.Now().Sub(start) }()
	// Unfinished changes are taken in hand before any folder is touched.
	rep.Mutations, err = converge(ctx, db, opts, key, logger)
	if err != nil {
		return rep, err
	}
	// A change that failed failed this run, which the next run counts: the
	// next run follows the backoff a failing folder's pass earns the
	// account, so a change that keeps failing spends its attempts at that
	// spacing rather than the interval's.
	rep.Next, rep.FailuresBefore = opts.Now().Add(opts.Interval), state.ConsecutiveFailures
	if rep.Mutations.Failed > 0 {
		rep.FailuresBefore++
		rep.Next = state.RunStartedAt.Add(opts.Backoff(rep.FailuresBefore))
	}
	resolutions, kept, err := discover(ctx, opts)
	if opts.Keep == nil {
		// The mailbox work is done: give the slots back before scheduling
		// the folder passes, which need them.
		_ = held.Release(ctx)
		if opts.MailboxDone != nil {
			opts.MailboxDone()
		}
	}
	if err != nil {
		return rep, err
	}
	rep.Aliases = len(resolutions)

	var (
		audits    []audit
		scheduled []ScheduledPass
	)
	err = mailstore.RetryConflicts(ctx, db, opts.CommitAttempts, func(ctx context.Context, tx pgx.Tx) error {
		audits, scheduled, rep.FolderPassesScheduled = nil, nil, 0
		accountID, err := mailstore.EnsureAccount(ctx, tx, key)
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
			pass := river.InsertManyParams{Args: jobs.FolderPass{AccountID: opts.Account.ID, Alias: r.Alias}}
			if opts.PassOpts != nil {
				pass.InsertOpts = opts.PassOpts(len(inserts))
			}
			inserts = append(inserts, pass)
			scheduled = append(scheduled, ScheduledPass{Alias: r.Alias})
		}
		if len(inserts) > 0 {
			res, err := opts.Inserter.InsertManyTx(ctx, tx, inserts)
			if err != nil {
				return fmt.Errorf("account run: schedule folder passes: %w", err)
			}
			for i, r := range res {
				scheduled[i].Job, scheduled[i].Duplicate = r.Job, r.UniqueSkippedAsDuplicate
				if !r.UniqueSkippedAsDuplicate {
					rep.FolderPassesScheduled++
				}
			}
		}
		// What a push account's watch watches: what this run resolved.
		if _, err := mailstore.RecordResolutions(ctx, tx, key, resolved); err != nil {
			return err
		}
		return opts.Finish(ctx, tx, rep.Next, rep.FailuresBefore)
	})
	if err != nil {
		return rep, err
	}
	if opts.Keep != nil {
		opts.Keep(kept, held, scheduled)
		held, kept = nil, nil
	}

	for _, a := range audits {
		logMappingChange(ctx, logger, a)
	}
	for _, r := range resolutions {
		if r.Err != nil {
			rep.Unresolved++
			logger.WarnContext(ctx, "folder alias did not resolve; that folder is skipped this run",
				slog.String("alias", r.Alias), slog.String("failure", failure.Name(r.Err)), slog.String("error", r.Err.Error()))
		}
	}
	return rep, nil
}
