package workers

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// carryFor is how long a job goes on over its session with work it could
// leave to River — another round of a folder that has more, the next
// carried unit — before it hands the rest back. It keeps a River worker
// from being held for long, and stays well inside every synchronization
// job's timeout.
const carryFor = 5 * time.Minute

// carrier runs the units of one account a job hands on over its own
// mailbox session, so the server sees one login where it would see one per
// unit: an account run goes on to the folder passes it scheduled, over the
// session it listed the folders with, and a folder pass goes on to the
// reconciliation window its final checkpoint scheduled, and to its own
// next round while the folder has more and nothing else of the account
// waits. The units handed on are carried jobs (jobqueue.Carried): pending
// River jobs, inserted with the data they depend on, covered by the
// carrier's liveness lock and completed by the carrier, or handed back to
// River when it does not run them (carry).
//
// The carrier counts against the connection bounds as the one unit it is:
// it holds one folder slot, and each carried unit takes only its alias's
// lock beside it.
type carrier struct {
	deps Dependencies
	// id is the job whose liveness lock, on conn, covers what is carried.
	id      int64
	conn    *pgxpool.Conn
	account config.Account
	start   time.Time
	// sess is the session units go on over, opened by the first that needs
	// one, nil after a failure left it in doubt.
	sess *mailsession.Session
}

// newCarrier returns the carrier of job id, which holds its liveness lock
// on conn, for account.
func (d Dependencies) newCarrier(id int64, conn *pgxpool.Conn, account config.Account) *carrier {
	return &carrier{deps: d, id: id, conn: conn, account: account, start: d.Now()}
}

// session returns the session the next unit works over, naming alias's
// work, opened if the carrier has none.
func (c *carrier) session(ctx context.Context, alias string) (*mailsession.Session, error) {
	if c.sess == nil {
		s, err := c.deps.openMailbox(ctx, c.account, alias)
		if err != nil {
			return nil, err
		}
		c.sess = s
	}
	c.sess.Work(alias)
	return c.sess, nil
}

// close ends the carrier's session. A failed logout changes nothing:
// everything the units read is committed.
func (c *carrier) close() {
	if c.sess != nil {
		_ = c.sess.Close()
		c.sess = nil
	}
}

// more reports whether the carrier goes on with work it could leave to
// River: the process is not stopping, carryFor has not passed, and no
// other unit of the account waits in the process's gate for its turn.
func (c *carrier) more(ctx context.Context) bool {
	if ctx.Err() != nil || c.deps.Now().Sub(c.start) >= carryFor {
		return false
	}
	select {
	case <-c.deps.Stopping:
		return false
	default:
	}
	return c.deps.gate == nil || !c.deps.gate.Waiting(config.AccountKey(c.account.ID))
}

// carry runs the carried job row with run and reports whether the
// carrier may go on to its next unit. run completes the job itself, and
// works with a context whose job logger is the carried job's, logger with
// the job's identity. What else it returns hands the job back to River:
//   - a snooze (the unit stopped with work left, or met a full bound)
//     makes the job due when the snooze would have ended, and the carrier
//     may go on;
//   - a failure is what the job's own worker would have returned, so it
//     goes through the failure middleware as that would have (recorded
//     against the folder and the account's run, a throttle recorded), and
//     the middleware's verdict is applied to the job: snoozed, cancelled,
//     or due at once for River's retry. The carrier's session, in doubt
//     after a failure, is closed, and the carrier goes on to nothing more.
func (c *carrier) carry(ctx context.Context, row *rivertype.JobRow, logger *slog.Logger, run func(ctx context.Context, job unitJob) error) bool {
	logger = logger.With(slog.Int64("carried_job_id", row.ID), slog.String("carried_job_kind", row.Kind))
	ctx = jobqueue.WithLogger(ctx, logger)
	start := c.deps.Now()
	err := run(ctx, carriedJob(row.ID))
	attrs := []any{slog.Duration("duration", c.deps.Now().Sub(start))}
	var snooze *rivertype.JobSnoozeError
	switch {
	case err == nil:
		logger.InfoContext(ctx, "carried job finished", append(attrs, slog.String("outcome", "completed"))...)
		return true
	case errors.As(err, &snooze):
		logger.InfoContext(ctx, "carried job handed back to River", append(attrs, slog.String("outcome", "snoozed"))...)
		c.release(ctx, logger, c.deps.Now().Add(snooze.Duration), row.ID)
		return ctx.Err() == nil
	}
	c.close()
	verdict := err
	if c.deps.failures != nil {
		verdict = c.deps.failures.Work(ctx, row, func(context.Context) error { return err })
	}
	var cancel *rivertype.JobCancelError
	switch {
	case errors.As(verdict, &snooze):
		c.release(ctx, logger, c.deps.Now().Add(snooze.Duration), row.ID)
	case errors.As(verdict, &cancel):
		if cerr := jobqueue.CancelCarried(context.WithoutCancel(ctx), c.conn, row.ID, verdict.Error()); cerr != nil {
			c.release(ctx, logger, c.deps.Now(), row.ID)
		}
	default:
		c.release(ctx, logger, c.deps.Now(), row.ID)
	}
	logger.InfoContext(ctx, "carried job finished", append(attrs, slog.String("outcome", jobqueue.Outcome(verdict)))...)
	return false
}

// release hands the carried jobs ids back to River, due at at.
func (c *carrier) release(ctx context.Context, logger *slog.Logger, at time.Time, ids ...int64) {
	if err := jobqueue.ReleaseCarried(context.WithoutCancel(ctx), c.conn, at, ids...); err != nil {
		// The orphan sweep releases them once the carrier's lock is gone.
		logger.WarnContext(ctx, "carried jobs not handed back; the orphan sweep will", slog.String("error_type", failure.Name(err)))
	}
}

// unitJob is the job a unit runs as: the one its worker was given, or one
// a carrier inserted and carries.
type unitJob struct {
	id int64
	// record records output as the job's progress (river.RecordOutput),
	// for the job a worker was given; a carried job records it when it
	// completes.
	record func(ctx context.Context, output any)
	// complete completes the job in tx, with output.
	complete func(ctx context.Context, tx pgx.Tx, output any) error
}

// ownJob is the unitJob of job, which River gave its worker.
func ownJob[T river.JobArgs](job *river.Job[T]) unitJob {
	return unitJob{
		id:     job.ID,
		record: func(ctx context.Context, output any) { _ = river.RecordOutput(ctx, output) },
		complete: func(ctx context.Context, tx pgx.Tx, output any) error {
			_ = river.RecordOutput(ctx, output)
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		},
	}
}

// carriedJob is the unitJob of the carried job id.
func carriedJob(id int64) unitJob {
	return unitJob{
		id:     id,
		record: func(context.Context, any) {},
		complete: func(ctx context.Context, tx pgx.Tx, output any) error {
			// A job released meanwhile (by an operator, or the sweep) is
			// River's again: the work done stands, and its own run finds
			// it done.
			_, err := jobqueue.CompleteCarried(ctx, tx, id, output)
			return err
		},
	}
}

// completeNow completes job outside any other transaction.
func (j unitJob) completeNow(ctx context.Context, db mailstore.TxBeginner, output any) error {
	return pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error { return j.complete(ctx, tx, output) })
}
