package push

import (
	"context"
	"crypto/sha256"
	"errors"
	"log/slog"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// errRecovered ends a subscription's wait when a folder it left out,
// degraded, may be watched again.
var errRecovered = errors.New("a degraded folder recovered")

// subscribe runs one subscription over sess, which has just been
// established and can subscribe, until it fails, its secrets rotate (as
// digested before sess was opened), the account's latest run resolves
// other folders, or the attempt reaches its lifetime (errRearm). It
// returns the consecutive failures.
//
// A server that declines the subscription is left for DegradationPeriod,
// during which the folders a subscription would name are watched one
// connection each (sessions) and the rest polled. While such sessions
// watch, a subscription the server does accept replaces them — they are
// closed once it is established — and one that fails costs them nothing:
// the server is asked again after DegradationPeriod.
//
// A folder the server will not open — deleted since the latest run
// resolved it, say — is left out and polled for DegradationPeriod, like a
// degraded folder, without counting against the subscription; so is a
// folder whose own session was degraded. The subscription is renewed to
// include it again once that has passed.
func (wt *watch) subscribe(ctx context.Context, sess *imapx.WatchSession, digest [sha256.Size]byte, set folderSet, failures int, sessions *folderSessions) (int, error) {
	s := wt.lim
	available := wt.undegraded(set.watched)
	if len(available) == 0 {
		// Every folder is degraded: nothing to subscribe to until one
		// recovers.
		_ = sess.Close()
		return failures, wt.pause(ctx, wt.nextRecovery(set.watched))
	}
	n := min(len(available), s.MaxSubscribedFolders)
	subscribed, rest := available[:n], available[n:]
	paths := make([]string, len(subscribed))
	for i, f := range subscribed {
		paths[i] = f.path
	}
	states, err := sess.Subscribe(ctx, paths)
	var refused *imapx.CommandError
	if errors.As(err, &refused) && !errors.Is(err, imapx.ErrSubscriptionDeclined) {
		// EXAMINE of the folder the subscription starts from was refused.
		_ = sess.Close()
		wt.logger.WarnContext(ctx, "mail server would not open the folder, so it is synchronized by polling",
			slog.String("alias", subscribed[0].alias), slog.String("error", err.Error()), slog.Duration("polling_for", s.DegradationPeriod))
		wt.degrade(ctx, subscribed[0], s.DegradationPeriod)
		return failures, nil
	}
	if errors.Is(err, imapx.ErrSubscriptionDeclined) {
		_ = sess.Close()
		wt.putOff(ctx, wt.opts.Now().Add(s.DegradationPeriod))
		wt.logger.InfoContext(ctx, "mail server declined the push subscription, so each folder is watched over a connection of its own",
			slog.Int("folders", len(subscribed)), slog.Duration("subscription_retried_in", s.DegradationPeriod))
		sessions.bounded = true
		wt.watchEach(ctx, sessions, set.watched)
		return failures, nil
	}
	if err != nil {
		_ = sess.Close()
		if ctx.Err() != nil {
			return failures, ctx.Err()
		}
		if sessions.active() {
			wt.askAgainLater(ctx, err)
			return failures, nil
		}
		return wt.subscriptionFailed(ctx, failures, err, set.watched)
	}
	// The subscription watches now: the sessions that watched one folder
	// each until this moment are no longer needed.
	sessions.stop()
	wt.logger.InfoContext(ctx, "account watches its folders through one push subscription", slog.Int("folders", len(subscribed)))
	wt.pastBound(ctx, rest)
	wt.setModes(ctx, subscribed, mailstore.ModePush)
	wt.opts.Metrics.addConnections(wt.account.ID, 1)
	defer wt.opts.Metrics.addConnections(wt.account.ID, -1)
	// What changed while nothing watched is read now.
	wt.catchUp(ctx, subscribed, states)

	wctx, stop := wt.untilFoldersChange(ctx, set)
	defer stop()
	if len(available) < len(set.watched) {
		var cancel context.CancelFunc
		wctx, cancel = context.WithDeadlineCause(wctx, wt.nextRecovery(set.watched), errRecovered)
		defer cancel()
	}
	for {
		changed, err := wt.wait(wctx, sess)
		if err != nil {
			_ = sess.Close()
			if ctx.Err() != nil {
				return failures, ctx.Err()
			}
			switch cause := context.Cause(wctx); {
			case errors.Is(cause, errFoldersChanged):
				wt.logger.InfoContext(ctx, "the account's latest run resolved other folders; its push subscription is renewed for them")
				return failures, nil
			case errors.Is(cause, errRecovered):
				wt.logger.InfoContext(ctx, "a folder left out of the push subscription is watched again; the subscription is renewed to include it")
				return failures, nil
			}
			return wt.subscriptionFailed(ctx, failures, err, set.watched)
		}
		// A wait that returned proves the subscription.
		failures = 0
		if err := wt.reported(ctx, subscribed, changed); err != nil {
			_ = sess.Close()
			return failures, err
		}
		if wt.expired() {
			_ = sess.Close()
			return failures, errRearm
		}
		if wt.rotated(ctx, digest) {
			_ = sess.Close()
			wt.logger.InfoContext(ctx, "push subscription was recycled: a secret it was opened with has changed", slog.Int("folders", len(subscribed)))
			return failures, nil
		}
	}
}
