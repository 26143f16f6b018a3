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

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/jobs"
)

// Disposition is what River does with a failed work unit. River is the
// layer between attempts: whatever pipeline a worker's calls ran under has
// spent its budget by the time the failure reaches here, so no worker
// repeats anything itself.
type Disposition int

const (
	// Cancel: permanent for this job (river.JobCancel), visible in River UI
	// as cancelled with the failure's identity.
	Cancel Disposition = iota
	// Retry: returned to River, which attempts the job again on the run
	// backoff (the worker's NextRetry).
	Retry
	// Defer: snoozed briefly (river.JobSnooze), not counted as a failure.
	Defer
)

func (d Disposition) String() string {
	switch d {
	case Retry:
		return "retry"
	case Defer:
		return "defer"
	}
	return "cancel"
}

// ClassifyFailure is the job failure classifier: it decides the job's fate
// on what a failure declares of itself (internal/failure's behaviour
// interfaces), as the resilience classifiers do.
//
//   - A lost optimistic-concurrency race another run won is a deferral:
//     Defer.
//   - A dependency that declined the work (failure.DependencyUnavailable),
//     or a mailbox out of reach after the account's pipelines spent their
//     attempts (mailsession.MailboxUnavailableError, whatever wraps it), is
//     worth attempting again later: Retry.
//   - A failure that declares its own repeatability (failure.RetryLater:
//     a mailbox out of reach, a throttling server, a token endpoint's
//     overload) is deferred to. The account run, folder pass and
//     reconciliation window never get that far with a throttle: the
//     middleware records it and snoozes them first (failurePolicy.throttle).
//   - A folder recreated under the unit is retried: the next attempt starts
//     the folder over from an empty checkpoint.
//   - PostgreSQL's own verdict on a database failure (database.Transient,
//     database.ConnectionLost) is how a brief database outage delays jobs
//     instead of losing them: Retry.
//   - Anything else — a rejected credential, a refused certificate or
//     command, an unrecognized failure — is permanent: Cancel. Repeating an
//     unrecognized rejection against a mail server is how accounts get
//     locked.
//
// The caller's own cancellation is not classified here; callers return it
// as is.
func ClassifyFailure(err error) Disposition {
	later, declared := failure.WorthRetryingLater(err)
	switch {
	case err == nil:
		return Cancel
	case failure.IsConcurrencyConflict(err):
		return Defer
	case failure.IsDependencyUnavailable(err), mailsession.IsMailboxUnavailable(err):
		return Retry
	case declared && later:
		return Retry
	case declared:
		return Cancel
	case errors.Is(err, imapx.ErrMailboxFolderRecreated), database.Transient(err), database.ConnectionLost(err):
		return Retry
	}
	return Cancel
}

// named gives err's text its name in brackets at the end (failure.Text),
// as River UI shows every failure.
func named(err error) error { return failure.Wrap(failure.Name(err), err) }

// cancelJob is river.JobCancel with the failure's name at the end of its
// text.
func cancelJob(err error) error { return river.JobCancel(named(err)) }

// failureMiddleware applies ClassifyFailure to whatever a worker returns,
// once, so no failure reaches River unclassified and none is classified
// twice: River's own verdicts (a cancel, a snooze) and a failure after the
// job's context ended pass through as they are, everything else becomes a
// retry, a snooze or a cancellation, and is logged once with its identity
// on the job's logger (which carries what the worker annotated: the
// account, the folder alias).
//
// It is installed once for every worker, through the River client's
// middleware (Register returns it; jobqueue.Config.Middleware installs it).
type failureMiddleware struct {
	river.MiddlewareDefaults
	logger *slog.Logger
	// deferral draws the snooze of a deferred job.
	deferral func() time.Duration
	// now is the clock.
	now func() time.Time
	// policies are what a failure of each job kind means beyond River.
	policies map[string]failurePolicy
}

// failurePolicy is what a failure of one kind of job means beyond River.
type failurePolicy struct {
	// record notes a failure (one River would retry or a permanent one)
	// before River records it: it is what the account's run backoff and
	// an operator's view count. The failure's name is failure.Name(err).
	record func(ctx context.Context, job *rivertype.JobRow, err error) error
	// endsJob makes a failure River would retry end the job instead: the
	// account's next run takes the work up again, so there is one retry
	// layer, the account's, and not a schedule per folder beside it.
	endsJob bool
	// afterCancel reacts to a failure that became permanent for the job,
	// before River records it; a reaction that fails leaves the job to
	// River's retry.
	afterCancel func(ctx context.Context, job *rivertype.JobRow, err error) error
	// throttle, when set, takes a server's throttling answer before it is
	// classified: it records the account's throttle and returns it, and
	// the job snoozes until it ends, counted as no failure. One that
	// fails leaves the job to River's retry.
	throttle func(ctx context.Context, job *rivertype.JobRow, err *imapx.ThrottledError) (mailstore.Throttle, error)
}

var _ rivertype.WorkerMiddleware = (*failureMiddleware)(nil)

// Work implements rivertype.WorkerMiddleware.
func (m *failureMiddleware) Work(ctx context.Context, job *rivertype.JobRow, doInner func(context.Context) error) error {
	err := doInner(ctx)
	var (
		cancel *rivertype.JobCancelError
		snooze *rivertype.JobSnoozeError
	)
	switch {
	case err == nil, ctx.Err() != nil, errors.As(err, &cancel), errors.As(err, &snooze):
		return err
	}
	logger := jobqueue.Logger(ctx, m.logger)
	identity := failure.Name(err)
	policy := m.policies[job.Kind]
	if th, ok := imapx.AsThrottled(err); ok && policy.throttle != nil {
		recorded, rerr := policy.throttle(ctx, job, th)
		if rerr == nil {
			return m.throttleSnooze(ctx, recorded, th)
		}
		logger.WarnContext(ctx, "the mail server throttles the account, and the throttle could not be recorded; River retries the job",
			slog.String("failure", identity), slog.String("error", rerr.Error()))
		return named(errors.Join(err, rerr))
	}
	disposition := ClassifyFailure(err)
	if disposition == Defer {
		logger.InfoContext(ctx, "deferred: another run got there first or a concurrency bound is reached", slog.String("failure", identity))
		return river.JobSnooze(m.deferral())
	}
	if policy.record != nil {
		if rerr := policy.record(ctx, job, err); rerr != nil {
			// Not recorded: River attempts the job again rather than
			// lose the failure from the count.
			logger.WarnContext(ctx, "failed, and the failure could not be recorded; River retries the job",
				slog.String("failure", identity), slog.String("error", err.Error()))
			return named(errors.Join(err, rerr))
		}
	}
	if disposition == Retry && policy.endsJob {
		logger.WarnContext(ctx, "failed; the folder waits for the account's next run, which the failure backs off",
			slog.String("failure", identity), slog.String("error", err.Error()))
		return cancelJob(err)
	}
	if disposition == Retry {
		if errors.Is(err, imapx.ErrMailboxFolderRecreated) {
			logger.WarnContext(ctx, "the folder was recreated on the server; the next attempt starts it over")
		} else {
			logger.WarnContext(ctx, "failed; retrying on the run backoff", slog.String("failure", identity), slog.String("error", err.Error()))
		}
		return named(err)
	}
	if react := policy.afterCancel; react != nil {
		if rerr := react(ctx, job, err); rerr != nil {
			logger.WarnContext(ctx, "failed permanently, and what follows could not be scheduled; River retries the job",
				slog.String("failure", identity), slog.String("error", err.Error()))
			return named(errors.Join(err, rerr))
		}
	}
	logger.WarnContext(ctx, "failed permanently", slog.String("failure", identity), slog.String("error", err.Error()))
	return cancelJob(err)
}

// unitArgs are the arguments every account-level and folder-level job
// carries.
type unitArgs struct {
	AccountID string `json:"account_id"`
	Alias     string `json:"alias"`
}

func decodeUnitArgs(job *rivertype.JobRow) (unitArgs, error) {
	var args unitArgs
	if err := json.Unmarshal(job.EncodedArgs, &args); err != nil {
		return args, fmt.Errorf("decode the arguments of %s job %d: %w", job.Kind, job.ID, err)
	}
	return args, nil
}

// recordRunFailure records an account run's failure against the account's
// current run.
func recordRunFailure(deps Dependencies) func(context.Context, *rivertype.JobRow, error) error {
	return func(ctx context.Context, job *rivertype.JobRow, failed error) error {
		args, err := decodeUnitArgs(job)
		if err != nil {
			return err
		}
		return mailstore.FailRun(context.WithoutCancel(ctx), deps.Pool, config.AccountKey(args.AccountID), failure.Name(failed), deps.Now())
	}
}

// recordFolderFailure records a pass's or window's failure against its
// folder and the account's current run (recordUnitFailure).
//
// A folder the server would not open (imapx.IsFolderRefused) that was
// healthy until then is the one failure that does not postpone the
// account's next run but brings it forward to now: the folder may have
// been deleted or renamed since the run resolved it, only the run's
// listing can tell, and an alias that no longer resolves ends that folder
// alone (FolderAliasUnresolved) instead of backing off every folder of the
// account. A refusal repeated before the folder succeeds again backs off
// as any failure does, so a folder the server lists and never opens is
// not asked for in a loop.
func recordFolderFailure(deps Dependencies) func(context.Context, *rivertype.JobRow, error) error {
	return recordUnitFailure(deps, func(ctx context.Context, tx pgx.Tx, key, alias string, failed error) (mailstore.AccountState, bool, error) {
		rediscover := false
		if imapx.IsFolderRefused(failed) {
			healthy, err := mailstore.FolderHealthy(ctx, tx, key, alias)
			if err != nil {
				return mailstore.AccountState{}, false, err
			}
			rediscover = healthy
		}
		st, err := mailstore.FailFolder(ctx, tx, key, alias, failure.Name(failed), deps.Now())
		return st, rediscover, err
	})
}

// recordUnitFailure returns the failure recorder of a unit of an account
// run: in one transaction under the account's scheduling lock, record
// writes the failure and returns the account's state, and the account's
// next run moves to where the run backoff puts it — the failed unit counts
// as the account run's own failure would, and nothing retries the unit on
// a schedule of its own — or, when record asks for the folders to be
// listed again, to now. An account with no run started has nothing to
// postpone.
func recordUnitFailure(deps Dependencies, record func(ctx context.Context, tx pgx.Tx, key, alias string, failed error) (st mailstore.AccountState, rediscover bool, err error)) func(context.Context, *rivertype.JobRow, error) error {
	return func(ctx context.Context, job *rivertype.JobRow, failed error) error {
		args, err := decodeUnitArgs(job)
		if err != nil {
			return err
		}
		ctx = context.WithoutCancel(ctx)
		key := config.AccountKey(args.AccountID)
		s := deps.Config.Sync
		return pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
			if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleAccountRuns, key); err != nil {
				return err
			}
			st, rediscover, err := record(ctx, tx, key, args.Alias, failed)
			if err != nil {
				return err
			}
			if rediscover {
				_, err = jobqueue.AdvanceAccountRun(ctx, tx, jobs.AccountRun{}.Kind(), key, deps.Now())
				return err
			}
			if st.RunStartedAt == nil {
				return nil
			}
			at := st.RunStartedAt.Add(RunBackoff(s.Interval, s.MaxFailureBackoff, st.ConsecutiveFailures+1))
			_, err = jobqueue.PostponeAccountRun(ctx, tx, jobs.AccountRun{}.Kind(), key, at)
			return err
		})
	}
}
