package workers

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// A server that throttles an account — an *imapx.ThrottledError from any
// step of an account run, a folder pass or a reconciliation window — has
// given the account a schedule, not a failure: the failure middleware
// records the throttle for the account (mailstore.RecordThrottle), so
// every unit of the account on every replica waits until its time, and
// snoozes the unit until then. Nothing counts it as a failed run, and no
// retry layer repeats the command: the snooze is the one wait.
//
// How long: the server's suggested delay when it gave one, with a tenth
// added at most as jitter so accounts sharing a server do not return in
// step, and never less than minThrottleWait; otherwise the run backoff
// for the throttles in a row, which a completed folder pass resets.

// minThrottleWait is the shortest wait a throttled account is given,
// whatever the server suggested: a unit that comes back at once would
// log in again at once.
const minThrottleWait = time.Second

// throttleWait is how long an account waits after its consecutive-th
// throttle in a row, suggested being the server's suggestion (0: none).
func (d Dependencies) throttleWait(consecutive int, suggested time.Duration) time.Duration {
	if suggested <= 0 {
		s := d.Config.Sync
		return RunBackoff(s.Interval, s.MaxFailureBackoff, consecutive)
	}
	return max(minThrottleWait, suggested+rand.N(suggested/10+1))
}

// recordThrottle is the failure middleware's reaction to a throttled unit
// of an account: the account's throttle is recorded, and the unit waits
// until it ends. run marks an account run's own throttle, which leaves the
// account's failed runs as they were (mailstore.ThrottleRun).
func recordThrottle(deps Dependencies, run bool) func(context.Context, *rivertype.JobRow, *imapx.ThrottledError) (mailstore.Throttle, error) {
	return func(ctx context.Context, job *rivertype.JobRow, th *imapx.ThrottledError) (mailstore.Throttle, error) {
		args, err := decodeUnitArgs(job)
		if err != nil {
			return mailstore.Throttle{}, err
		}
		ctx = context.WithoutCancel(ctx)
		key := config.AccountKey(args.AccountID)
		var out mailstore.Throttle
		err = pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
			var err error
			out, err = mailstore.RecordThrottle(ctx, tx, key, string(th.Reason), th.Delay, deps.Now(),
				func(consecutive int) time.Duration { return deps.throttleWait(consecutive, th.Delay) })
			if err != nil || !run {
				return err
			}
			return mailstore.ThrottleRun(ctx, tx, key)
		})
		return out, err
	}
}

// waitOutThrottle returns, when accountKey's server throttled it and the
// throttle still holds, the snooze that makes the unit wait until it ends,
// and logs why; nil otherwise. It asks nothing of the mail server.
func (d Dependencies) waitOutThrottle(ctx context.Context, q mailstore.Querier, accountKey string, logger *slog.Logger) error {
	th, ok, err := mailstore.ActiveThrottle(ctx, q, accountKey, d.Now())
	if err != nil || !ok {
		return err
	}
	wait := th.Until.Sub(d.Now())
	logger.InfoContext(ctx, "the account's server throttles it; the work waits until then",
		slog.String("reason", th.Reason), slog.Time("throttled_until", th.Until), slog.Duration("wait", wait))
	return river.JobSnooze(wait)
}

// throttleSnooze is the snooze of a unit whose server just throttled its
// account until th.Until, logged once on the job's logger.
func (m *failureMiddleware) throttleSnooze(ctx context.Context, th mailstore.Throttle, err *imapx.ThrottledError) error {
	now := time.Now
	if m.now != nil {
		now = m.now
	}
	wait := max(th.Until.Sub(now()), 0)
	attrs := []any{slog.String("failure", imapx.ThrottledIdentity), slog.String("reason", string(err.Reason)),
		slog.Time("throttled_until", th.Until), slog.Duration("wait", wait), slog.Int("throttles_in_a_row", th.Consecutive)}
	if err.Delay > 0 {
		attrs = append(attrs, slog.Duration("suggested_delay", err.Delay))
	}
	jobqueue.Logger(ctx, m.logger).WarnContext(ctx, "the mail server throttles the account; its work waits, and no failure is counted", attrs...)
	return river.JobSnooze(wait)
}
