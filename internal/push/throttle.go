package push

import (
	"context"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// throttled reports whether cause is the mail server throttling the
// account (an imapx.ThrottledError) and, when it is, records the throttle
// for the whole account (mailstore.RecordThrottle, the row every unit of
// work reads before it asks the server anything) and waits until it ends.
// A throttle is no failure of push: a server asking for a pause is not one
// that stopped serving a mechanism, so it neither counts towards
// MaxConsecutiveFailures nor degrades anything to polling. It reports
// false, and does nothing, for any other failure.
func (wt *watch) throttled(ctx context.Context, cause error) bool {
	th, ok := imapx.AsThrottled(cause)
	if !ok || ctx.Err() != nil {
		return ok
	}
	now := wt.opts.Now()
	var recorded mailstore.Throttle
	err := pgx.BeginFunc(ctx, wt.opts.Pool, func(tx pgx.Tx) error {
		var err error
		recorded, err = mailstore.RecordThrottle(ctx, tx, wt.key, string(th.Reason), th.Delay, now,
			func(consecutive int) time.Duration { return wt.throttleWait(consecutive, th.Delay) })
		return err
	})
	until := recorded.Until
	if err != nil {
		// The wait still holds in this watch, whatever the database says.
		until = now.Add(wt.throttleWait(1, th.Delay))
		wt.logger.WarnContext(ctx, "could not record the account's throttle", slog.String("error", err.Error()))
	}
	wt.logger.InfoContext(ctx, "the mail server throttles the account; the watch waits",
		slog.String("reason", string(th.Reason)), slog.Duration("waiting", until.Sub(now)))
	_ = sleep(ctx, until.Sub(now))
	return true
}

// throttleWait is how long the watch waits after the consecutive-th
// throttle in a row: the server's suggestion when it made one (at least a
// second, and up to a tenth longer, as every unit of work waits one),
// otherwise ten seconds more for each throttle in a row, at most the
// degradation period, jittered so the per-folder sessions do not return
// together.
func (wt *watch) throttleWait(consecutive int, suggested time.Duration) time.Duration {
	if suggested > 0 {
		return max(time.Second, suggested+rand.N(suggested/10+1))
	}
	d := min(time.Duration(consecutive)*10*time.Second, wt.lim.DegradationPeriod)
	return d - rand.N(d/5+1)
}

// awaitThrottle waits, before a watching session is opened, until a
// throttle another unit of work recorded for the account has ended.
func (wt *watch) awaitThrottle(ctx context.Context) error {
	th, ok, err := mailstore.ActiveThrottle(ctx, wt.opts.Pool, wt.key, wt.opts.Now())
	if err != nil || !ok {
		return err
	}
	return sleep(ctx, th.Until.Sub(wt.opts.Now()))
}
