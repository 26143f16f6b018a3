package push

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// perFolder watches every folder over a session of its own until until or
// the attempt's lifetime, whichever comes first, and returns nil then; or
// the context's error. It is the fallback for a server that offers IDLE
// but no NOTIFY, or declined a subscription; it never subscribes.
func (wt *watch) perFolder(ctx context.Context, folders []watchedFolder, until time.Time) error {
	end := until
	// The lifetime shortens the cycle only while it lies ahead: once it has
	// passed with a folder still degraded, the cycle runs to until, so the
	// watch does not reconnect in a loop waiting for the degradation.
	if life := wt.started.Add(wt.opts.Lifetime); life.After(wt.opts.Now()) && life.Before(end) {
		end = life
	}
	fctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	var wg sync.WaitGroup
	for _, f := range folders {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wt.watchFolder(fctx, f)
		}()
	}
	wg.Wait()
	return ctx.Err()
}

// watchFolder keeps one folder watched over a session of its own (IDLE on
// the folder, examined) until ctx ends. Its failures degrade this folder
// alone (folderFailed); a database failure while reporting ends the
// session, which is reopened, rather than the attempt.
func (wt *watch) watchFolder(ctx context.Context, f watchedFolder) {
	s := wt.lim
	failures := 0
	for ctx.Err() == nil {
		if until, ok := wt.degradedUntil(f.alias); ok {
			_ = sleep(ctx, until.Sub(wt.opts.Now()))
			continue
		}
		digest := wt.secretsDigest(ctx)
		sess, err := wt.open(ctx, f.alias)
		if err == nil && !sess.CanIdle() {
			_ = sess.Close()
			wt.logger.WarnContext(ctx, "mail server advertises no IDLE capability, so the folder is synchronized by polling",
				slog.String("alias", f.alias), slog.Duration("push_retried_in", s.DegradationPeriod))
			wt.degrade(ctx, f, s.DegradationPeriod)
			continue
		}
		if err == nil {
			if _, err = sess.WatchFolder(ctx, f.path); err != nil {
				_ = sess.Close()
			}
		}
		if err != nil {
			failures = wt.folderFailed(ctx, f, failures, err)
			continue
		}
		wt.setModes(ctx, []watchedFolder{f}, mailstore.ModePush)
		wt.opts.Metrics.addConnections(wt.account.ID, 1)
		wt.catchUp(ctx, []watchedFolder{f})
		for {
			changed, err := sess.Wait(ctx, s.RenewalInterval)
			if err != nil {
				_ = sess.Close()
				failures = wt.folderFailed(ctx, f, failures, err)
				break
			}
			failures = 0
			if err := wt.reported(ctx, []watchedFolder{f}, changed); err != nil {
				_ = sess.Close()
				break
			}
			if wt.rotated(ctx, digest) {
				_ = sess.Close()
				wt.logger.InfoContext(ctx, "push session was recycled: a secret it was opened with has changed", slog.String("alias", f.alias))
				break
			}
		}
		wt.opts.Metrics.addConnections(wt.account.ID, -1)
	}
}
