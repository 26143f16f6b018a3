package push

import (
	"context"
	"errors"
	"log/slog"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// subscribe runs one subscription over sess, which has just been
// established and can subscribe, until it fails, its secrets rotate or the
// attempt reaches its lifetime (errRearm). It returns the consecutive
// failures. A server that declines the subscription is left for
// DegradationPeriod, during which each folder is watched over a session of
// its own; subscribe does not open those sessions itself.
func (wt *watch) subscribe(ctx context.Context, sess *imapx.WatchSession, folders []watchedFolder, failures int) (int, error) {
	s := wt.lim
	n := min(len(folders), s.MaxSubscribedFolders)
	subscribed, rest := folders[:n], folders[n:]
	paths := make([]string, len(subscribed))
	for i, f := range subscribed {
		paths[i] = f.path
	}
	digest := wt.secretsDigest(ctx)
	_, err := sess.Subscribe(ctx, paths)
	if errors.Is(err, imapx.ErrSubscriptionDeclined) {
		_ = sess.Close()
		wt.declinedUntil = wt.opts.Now().Add(s.DegradationPeriod)
		wt.logger.InfoContext(ctx, "mail server declined the push subscription, so each folder is watched over a connection of its own",
			slog.Int("folders", len(subscribed)), slog.Duration("subscription_retried_in", s.DegradationPeriod))
		return failures, nil
	}
	if err != nil {
		_ = sess.Close()
		if ctx.Err() != nil {
			return failures, ctx.Err()
		}
		return wt.subscriptionFailed(ctx, failures, err, folders)
	}
	wt.logger.InfoContext(ctx, "account watches its folders through one push subscription", slog.Int("folders", len(subscribed)))
	for _, f := range rest {
		if wt.setMode(ctx, f, mailstore.ModePolling) {
			wt.logger.InfoContext(ctx, "folder is past the subscription's bound (MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS), so it is synchronized by polling",
				slog.String("alias", f.alias), slog.Int("max_subscribed_folders", s.MaxSubscribedFolders))
		}
	}
	wt.setModes(ctx, subscribed, mailstore.ModePush)
	wt.opts.Metrics.addConnections(wt.account.ID, 1)
	defer wt.opts.Metrics.addConnections(wt.account.ID, -1)
	// What changed while nothing watched is read now.
	wt.catchUp(ctx, subscribed)

	for {
		changed, err := sess.Wait(ctx, s.RenewalInterval)
		if err != nil {
			_ = sess.Close()
			if ctx.Err() != nil {
				return failures, ctx.Err()
			}
			return wt.subscriptionFailed(ctx, failures, err, folders)
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
