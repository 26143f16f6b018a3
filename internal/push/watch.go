// Package push holds one push account's watch: it opens a connection,
// reads what the server advertises on it, and watches the folders the
// account's latest run resolved — through one NOTIFY subscription naming
// up to Limits.MaxSubscribedFolders of them, in configuration order, where
// the server offers NOTIFY and IDLE; one IDLE session per folder where it
// offers IDLE alone, or declined a subscription (then as many folders as a
// subscription would name); not at all where it offers neither. A report
// ends that folder's wait: its pass is queued to run at once, or, when one
// is running, marked to go around once more (mailstore.ReportChange).
//
// Push adds no schedule of its own. A session that starts watching a
// folder queues a pass only when the folder may have changed while nothing
// watched it: when what the server reports of it now (EXAMINE, or the
// STATUS a subscription asks for) differs from what the folder's last
// completed pass observed (mailstore.ObservedStates). A server that
// declined a subscription, or advertised no NOTIFY, is asked again after
// Limits.DegradationPeriod over one connection of its own, while the
// per-folder sessions keep watching; when it now subscribes, they are
// closed once the subscription is established.
//
// Consecutive failures are counted per subscription, or per folder
// session; a wait the server ends at once without a report is one. At
// Limits.MaxConsecutiveFailures the folders they watch are synchronized by
// polling for Limits.DegradationPeriod, recorded as each folder's
// effective mode (mailstore.SetEffectiveMode).
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
	"math/rand/v2"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
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

// MinWait is the shortest wait that counts as one the server held: a wait
// that ends sooner without reporting a change is a failure
// (ErrWaitEndedEarly), so a server that ends every IDLE at once is not
// asked again in a loop.
const MinWait = time.Second

// ErrWaitEndedEarly is the failure of a wait the server ended sooner than
// MinWait without reporting a change in a watched folder.
var ErrWaitEndedEarly = failure.New("MailboxWaitEndedEarly", "push: the mail server ended the wait at once without reporting a change")

// operation names the subscription in the resilience pipelines' logs and
// metrics; a per-folder session uses the folder alias.
const operation = "push-watch"

// Limits bound a watch. They are the account's synchronization settings;
// Run does not check them, configuration has.
type Limits struct {
	// MaxSubscribedFolders is how many folders one subscription names,
	// and how many are watched one connection each when the server
	// declined a subscription; the rest are synchronized by polling.
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
	// Resolutions tells the watch that the account's latest run resolved
	// other folders. Default: one of the watch's own, polling every
	// ResolutionPollPeriod; a process with many push accounts shares one.
	Resolutions *Resolutions
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
	// Unbound: no run of the account has resolved its folders yet; the
	// account run does, so the next attempt should come shortly.
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
	if opts.Resolutions == nil {
		opts.Resolutions = NewResolutions(opts.Pool, ResolutionPollPeriod)
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

// watch is one attempt.
type watch struct {
	opts    Options
	lim     Limits
	account config.Account
	key     string
	logger  *slog.Logger
	started time.Time

	// retryAt is when a server that declined a subscription, or advertised
	// no NOTIFY, is asked for one again (mailstore.SubscriptionRetryAt).
	retryAt time.Time
	// changes receives when the account's latest run may have resolved
	// other folders; one goroutine at a time reads it.
	changes <-chan struct{}
	// unresolved holds, by alias, why the latest run resolved it to no
	// folder, as the attempt last said so (noteUnresolved).
	unresolved map[string]string

	// opening serializes the watch's connection attempts (open).
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
	sessions := &folderSessions{wt: wt, running: map[watchedFolder]*folderRun{}}
	defer sessions.stop()
	retryAt, err := mailstore.SubscriptionRetryAt(ctx, wt.opts.Pool, wt.key)
	if err != nil {
		return err
	}
	wt.retryAt = retryAt
	set, err := wt.boundFolders(ctx)
	if err != nil {
		return err
	}
	if set.version == 0 {
		// No run of the account has resolved its folders.
		return &endError{End{Reason: Unbound}}
	}
	changes, stopFollowing := wt.opts.Resolutions.follow(wt.key, set.version)
	defer stopFollowing()
	wt.changes = changes

	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if failures == 0 && wt.expired() {
			return &endError{End{Reason: Rearm}}
		}
		if set, err = wt.folders(ctx); err != nil {
			return err
		}
		wt.noteUnresolved(ctx, set)
		if len(set.watched) == 0 {
			// The latest run resolved none of the account's folders:
			// nothing to watch until a run resolves one.
			sessions.stop()
			if err := wt.pause(ctx, wt.rearmAt()); err != nil {
				return err
			}
			continue
		}
		now := wt.opts.Now()
		if sessions.active() {
			// The folders are watched one connection each; a changed
			// binding set changes only the sessions it concerns.
			wt.watchEach(ctx, sessions, set.watched)
			if now.Before(wt.retryAt) {
				if err := wt.pause(ctx, earliest(wt.retryAt, wt.rearmAt())); err != nil {
					return err
				}
				continue
			}
		}
		// The digest is taken before the connection opens, so a secret
		// rotated while it opened is noticed at the first renewal.
		digest := wt.secretsDigest(ctx)
		sess, err := wt.open(ctx, operation)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if sessions.active() {
				wt.askAgainLater(ctx, err)
				continue
			}
			if failures, err = wt.subscriptionFailed(ctx, failures, err, set.watched); err != nil {
				return err
			}
			continue
		}
		period := wt.lim.DegradationPeriod
		switch {
		case !sess.CanIdle():
			_ = sess.Close()
			sessions.stop()
			wt.logger.WarnContext(ctx, "mail server advertises no IDLE capability, so the account's folders are synchronized by polling",
				slog.Duration("push_retried_in", period))
			wt.setModes(ctx, set.watched, mailstore.ModePolling)
			return &endError{End{Reason: Polling, For: period}}
		case !sess.CanSubscribe():
			_ = sess.Close()
			wt.logger.InfoContext(ctx, "mail server advertises no NOTIFY capability, so each folder is watched over a connection of its own",
				slog.Duration("subscription_retried_in", period))
			wt.putOff(ctx, now.Add(period))
			sessions.bounded = false
			wt.watchEach(ctx, sessions, set.watched)
			failures = 0
			continue
		case now.Before(wt.retryAt):
			// The server declined a subscription before this attempt
			// began: until it is asked again, the folders a subscription
			// would name are watched one connection each.
			_ = sess.Close()
			sessions.bounded = true
			wt.watchEach(ctx, sessions, set.watched)
			failures = 0
			continue
		}
		failures, err = wt.subscribe(ctx, sess, digest, set, failures, sessions)
		if errors.Is(err, errRearm) {
			return &endError{End{Reason: Rearm}}
		}
		if err != nil {
			return err
		}
	}
}

// putOff records at as when the server is asked for a subscription again,
// in memory and durably, so neither a re-armed attempt nor another process
// asks sooner. A failure to record it is logged: the attempt still waits.
func (wt *watch) putOff(ctx context.Context, at time.Time) {
	wt.retryAt = at
	if err := mailstore.SetSubscriptionRetryAt(context.WithoutCancel(ctx), wt.opts.Pool, wt.key, at); err != nil {
		wt.logger.WarnContext(ctx, "could not record when the push subscription is asked for again", slog.String("error", err.Error()))
	}
}

// askAgainLater is what a failure to ask for a subscription costs while
// the folders are watched one connection each: nothing but the question,
// which is asked again after DegradationPeriod. The sessions that watch
// are not disturbed.
func (wt *watch) askAgainLater(ctx context.Context, cause error) {
	period := wt.lim.DegradationPeriod
	wt.logger.InfoContext(ctx, "could not ask the mail server for a push subscription; each folder stays watched over a connection of its own",
		slog.Duration("subscription_retried_in", period), slog.String("error", cause.Error()))
	wt.putOff(ctx, wt.opts.Now().Add(period))
}

// expired reports whether the attempt has reached its lifetime with no
// folder degraded.
func (wt *watch) expired() bool {
	return !wt.opts.Now().Before(wt.rearmAt())
}

// rearmAt is when the attempt reaches its lifetime: its start plus the
// lifetime, or, when later, the end of the last folder degradation, which
// the lifetime never shortens.
func (wt *watch) rearmAt() time.Time {
	at := wt.started.Add(wt.opts.Lifetime)
	wt.mu.Lock()
	defer wt.mu.Unlock()
	for _, until := range wt.degraded {
		if until.After(at) {
			at = until
		}
	}
	return at
}

// pause waits until until, or until the account's latest run may have
// resolved other folders, or ctx ends (its error then).
func (wt *watch) pause(ctx context.Context, until time.Time) error {
	d := until.Sub(wt.opts.Now())
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-wt.changes:
	case <-ctx.Done():
	}
	return ctx.Err()
}

func earliest(a, b time.Time) time.Time {
	if b.Before(a) {
		return b
	}
	return a
}

// retryDelay is the pause before push is tried again after failures
// consecutive failures: short, since a failure only counts once the
// session's own resilience pipeline has spent its budget, and jittered by
// up to half again, so sessions that failed together do not return in
// step.
func retryDelay(failures int) time.Duration {
	d := min(time.Duration(failures)*time.Second, 10*time.Second)
	return d + rand.N(d/2+1)
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
