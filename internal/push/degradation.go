package push

import (
	"context"
	"log/slog"
	"time"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// subscriptionFailed counts one failure of the account's subscription, or
// of the connection it starts from, and pauses retryDelay before the next
// try. At MaxConsecutiveFailures the whole account is synchronized by
// polling for DegradationPeriod — without a connection per folder, which
// would ask a failing server for more connections — and the attempt ends
// (Polling).
func (wt *watch) subscriptionFailed(ctx context.Context, failures int, cause error, folders []watchedFolder) (int, error) {
	if wt.throttled(ctx, cause) {
		return failures, ctx.Err()
	}
	failures++
	s := wt.lim
	wt.logger.InfoContext(ctx, "push subscription failed", slog.Int("consecutive_failures", failures), slog.String("error", cause.Error()))
	if failures < s.MaxConsecutiveFailures {
		return failures, sleep(ctx, retryDelay(failures))
	}
	wt.logger.WarnContext(ctx, "push subscription failed too many times in a row, so its folders are synchronized by polling",
		slog.Int("consecutive_failures", failures), slog.Duration("polling_for", s.DegradationPeriod))
	wt.setModes(ctx, folders, mailstore.ModePolling)
	return 0, &endError{End{Reason: Polling, For: s.DegradationPeriod}}
}

// folderFailed counts one failure of a folder's own session; at
// MaxConsecutiveFailures the folder is degraded to polling for
// DegradationPeriod while the account's other folders stay watched. A
// failure that is the context ending counts nothing.
func (wt *watch) folderFailed(ctx context.Context, f watchedFolder, failures int, cause error) int {
	if ctx.Err() != nil || wt.throttled(ctx, cause) {
		return failures
	}
	failures++
	s := wt.lim
	wt.logger.InfoContext(ctx, "push session failed", slog.String("alias", f.alias),
		slog.Int("consecutive_failures", failures), slog.String("error", cause.Error()))
	if failures < s.MaxConsecutiveFailures {
		_ = sleep(ctx, retryDelay(failures))
		return failures
	}
	wt.logger.WarnContext(ctx, "push session failed too many times in a row, so the folder is synchronized by polling",
		slog.String("alias", f.alias), slog.Int("consecutive_failures", failures), slog.Duration("polling_for", s.DegradationPeriod))
	wt.degrade(ctx, f, s.DegradationPeriod)
	return 0
}

// degrade synchronizes f by polling for period: its own session is not
// reopened until then (degradedUntil), and the attempt does not end at its
// lifetime before then (expired).
func (wt *watch) degrade(ctx context.Context, f watchedFolder, period time.Duration) {
	wt.mu.Lock()
	wt.degraded[f.alias] = wt.opts.Now().Add(period)
	wt.mu.Unlock()
	wt.setModes(ctx, []watchedFolder{f}, mailstore.ModePolling)
}

// degradedUntil reports when alias's degradation ends, if it has not
// ended; an ended one is forgotten. It does not record the folder's mode:
// the session that watches it again does.
func (wt *watch) degradedUntil(alias string) (time.Time, bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	until, ok := wt.degraded[alias]
	if ok && !wt.opts.Now().Before(until) {
		delete(wt.degraded, alias)
		return time.Time{}, false
	}
	return until, ok
}

// undegraded returns those of folders not degraded now, in order.
func (wt *watch) undegraded(folders []watchedFolder) []watchedFolder {
	var out []watchedFolder
	for _, f := range folders {
		if _, ok := wt.degradedUntil(f.alias); !ok {
			out = append(out, f)
		}
	}
	return out
}

// nextRecovery is when the first of folders that is degraded now stops
// being degraded; the attempt's re-arm time when none is.
func (wt *watch) nextRecovery(folders []watchedFolder) time.Time {
	at := wt.rearmAt()
	for _, f := range folders {
		if until, ok := wt.degradedUntil(f.alias); ok && until.Before(at) {
			at = until
		}
	}
	return at
}
