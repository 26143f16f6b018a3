// Package push holds one push account's watch: it opens a connection,
// reads what the server advertises on it, and watches the account's bound
// folders — through one NOTIFY subscription naming up to
// Limits.MaxSubscribedFolders of them, in configuration order, where the
// server offers NOTIFY and IDLE; one IDLE session per folder where it
// offers IDLE alone; not at all where it offers neither. A report ends that
// folder's wait: its pass is queued to run at once, or, when one is
// running, marked to go around once more (mailstore.ReportChange).
//
// Consecutive failures are counted per subscription, or per folder
// session; at Limits.MaxConsecutiveFailures the folders they watch are
// synchronized by polling for Limits.DegradationPeriod, recorded as each
// folder's effective mode (mailstore.SetEffectiveMode).
//
// The watch never reads mail. Its sessions (imapx.WatchSession) send
// EXAMINE, NOTIFY and IDLE only; every pass it starts is the ordinary one,
// queued through Options.QueuePass. It does not schedule passes on the
// interval — the account run keeps doing that, so the interval stays the
// ceiling — and it knows nothing of River: an attempt ends with an End,
// and the caller decides how the job comes back.
package push

import (
	"cmp"
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/jobs"
)

// Lifetime bounds one attempt of a watch: once it has passed, at the end
// of a wait that returned, the watch closes its connections and the
// attempt ends (Rearm). A watch whose folders are degraded keeps them until
// their degradation has expired first, so the lifetime never shortens a
// degradation.
const Lifetime = time.Hour

// operation names the subscription in the resilience pipelines' logs and
// metrics; a per-folder session uses the folder alias.
const operation = "push-watch"

// Limits bound a watch. They are the account's synchronization settings;
// Run does not check them, configuration has.
type Limits struct {
	// MaxSubscribedFolders is how many folders one subscription names;
	// the rest are synchronized by polling.
	MaxSubscribedFolders int
	// RenewalInterval is the longest a wait lasts before it is renewed.
	RenewalInterval time.Duration
	// MaxConsecutiveFailures is how many failures in a row degrade a
	// subscription, or a folder's own session, to polling.
	MaxConsecutiveFailures int
	// DegradationPeriod is how long a degraded watch polls, and how long a
	// server that declined a subscription or lacks NOTIFY or IDLE is left
	// before it is asked again.
	DegradationPeriod time.Duration
}

// Options are what a watch is built from.
type Options struct {
	// Pool is the application database. Required.
	Pool *pgxpool.Pool
	// Env builds the account's endpoint; its Registry runs every
	// connection attempt under the account's MailboxSessionEstablishment
	// pipeline, and its Resolver resolves the secrets whose rotation
	// recycles a session. Required.
	Env mailendpoint.Env
	// Open opens a watching session. Required.
	Open func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error)
	// QueuePass inserts pass in tx and reports whether an equal pass was
	// already queued or running, so none was inserted. Required.
	QueuePass func(ctx context.Context, tx pgx.Tx, pass jobs.FolderPass) (duplicate bool, err error)
	// Metrics records the watch's instruments. Default: none.
	Metrics *Metrics
	// Now is the clock. Default: time.Now.
	Now func() time.Time
	// Lifetime bounds one attempt. Default: Lifetime.
	Lifetime time.Duration
	// Logger receives the watch's lines. Default: discard.
	Logger *slog.Logger
}

// Reason is why an attempt ended without failing.
type Reason int

const (
	// Rearm: the attempt reached its lifetime, or is to be started
	// afresh; the next attempt may begin at once.
	Rearm Reason = iota
	// Unbound: the account has no bound folder yet; the account run binds
	// them, so the next attempt should come shortly.
	Unbound
	// Polling: the account's folders are synchronized by polling for
	// End.For; push is tried again after it.
	Polling
)

// End is how an attempt ended without failing.
type End struct {
	Reason Reason
	// For is how long the account polls, with Polling; zero otherwise.
	For time.Duration
}

// Run watches account until the attempt ends: it returns an End, or the
// context's error once ctx ends, or a database failure that stopped it.
// Failures of the mail server are counted and degrade the watch; they are
// not returned. account must ask for push; Run does not check its mode.
func Run(ctx context.Context, account config.Account, lim Limits, opts Options) (End, error) {
	if opts.Pool == nil || opts.Open == nil || opts.QueuePass == nil || opts.Env.Registry == nil || opts.Env.Resolver == nil {
		return End{}, errors.New("push: a pool, an opener, a pass queue, a resilience registry and a secret resolver are required")
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	opts.Lifetime = cmp.Or(opts.Lifetime, Lifetime)
	opts.Logger = cmp.Or(opts.Logger, slog.New(slog.DiscardHandler))
	wt := &watch{
		opts: opts, lim: lim, account: account, key: config.AccountKey(account.ID), logger: opts.Logger,
		started: opts.Now(), degraded: map[string]time.Time{},
	}
	err := wt.run(ctx)
	var end *endError
	if errors.As(err, &end) {
		return end.End, nil
	}
	return End{}, err
}

// endError carries an End up from wherever the attempt decided it.
type endError struct{ End }

func (e *endError) Error() string { return "watch attempt ended" }

// watchedFolder is one bound folder of the account.
type watchedFolder struct {
	alias, path string
}

// watch is one attempt.
type watch struct {
	opts    Options
	lim     Limits
	account config.Account
	key     string
	logger  *slog.Logger
	started time.Time

	// declinedUntil is when a server that declined a subscription, or
	// advertised no NOTIFY, is asked for one again.
	declinedUntil time.Time

	// opening serializes the watch's connection attempts: per-folder
	// sessions opened all at once would exceed the establishment
	// pipeline's concurrency limit, which rejects rather than queues.
	opening sync.Mutex

	mu sync.Mutex
	// degraded holds, per alias, when a folder watched by a session of its
	// own stops being degraded to polling.
	degraded map[string]time.Time
}

// errRearm ends a subscription at the attempt's lifetime.
var errRearm = errors.New("watch lifetime reached")

// run is the attempt: it returns an *endError when the watch re-arms or
// degrades, or the context's error.
func (wt *watch) run(ctx context.Context) error {
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if failures == 0 && wt.expired() {
			return &endError{End{Reason: Rearm}}
		}
		folders, err := wt.boundFolders(ctx)
		if err != nil {
			return err
		}
		if len(folders) == 0 {
			// The account run has not bound a folder.
			return &endError{End{Reason: Unbound}}
		}
		sess, err := wt.open(ctx, operation)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if failures, err = wt.subscriptionFailed(ctx, failures, err, folders); err != nil {
				return err
			}
			continue
		}
		now := wt.opts.Now()
		period := wt.lim.DegradationPeriod
		switch {
		case !sess.CanIdle():
			_ = sess.Close()
			wt.logger.WarnContext(ctx, "mail server advertises no IDLE capability, so the account's folders are synchronized by polling",
				slog.Duration("push_retried_in", period))
			wt.setModes(ctx, folders, mailstore.ModePolling)
			return &endError{End{Reason: Polling, For: period}}
		case !sess.CanSubscribe() || now.Before(wt.declinedUntil):
			_ = sess.Close()
			if !sess.CanSubscribe() {
				wt.logger.InfoContext(ctx, "mail server advertises no NOTIFY capability, so each folder is watched over a connection of its own",
					slog.Duration("subscription_retried_in", period))
				wt.declinedUntil = now.Add(period)
			}
			if err := wt.perFolder(ctx, folders, wt.declinedUntil); err != nil {
				return err
			}
			failures = 0
			continue
		}
		failures, err = wt.subscribe(ctx, sess, folders, failures)
		if errors.Is(err, errRearm) {
			return &endError{End{Reason: Rearm}}
		}
		if err != nil {
			return err
		}
	}
}

// expired reports whether the attempt has reached its lifetime with no
// folder degraded.
func (wt *watch) expired() bool {
	if wt.opts.Now().Sub(wt.started) < wt.opts.Lifetime {
		return false
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	now := wt.opts.Now()
	for _, until := range wt.degraded {
		if now.Before(until) {
			return false
		}
	}
	return true
}

// retryDelay is the pause before push is tried again after failures
// consecutive failures: short, since a failure only counts once the
// session's own resilience pipeline has spent its budget.
func retryDelay(failures int) time.Duration {
	return min(time.Duration(failures)*time.Second, 10*time.Second)
}

// sleep waits d or until ctx ends, and returns ctx's error then.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
