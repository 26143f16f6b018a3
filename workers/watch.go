package workers

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/jobs"
)

// WatchLifetime bounds one attempt of a watch: once it has passed, at the
// end of a wait that returned, the watch closes its connections and
// snoozes, and comes back as the same row on whichever process fetches it
// next. A watch whose folders are degraded keeps them until their
// degradation has expired first, so the lifetime never shortens a
// degradation.
const WatchLifetime = time.Hour

// watchOperation names the subscription in the resilience pipelines' logs
// and metrics; a per-folder session uses the folder alias.
const watchOperation = "push-watch"

// WatchWorker holds one push account's watch (jobs.Watch): it opens a
// connection, reads what the server advertises on it, and watches the
// account's bound folders — through one NOTIFY subscription naming up to
// MaxSubscribedFolders of them, in configuration order, where the server
// offers NOTIFY and IDLE; one IDLE session per folder where it offers IDLE
// alone; not at all where it offers neither. A report ends that folder's
// wait: its pass is queued to run at once, or, when one is running, marked
// to go around once more (mailstore.ReportChange). The interval stays the
// ceiling: the account run keeps scheduling passes as it always does.
//
// The watch never reads mail. Its sessions (imapx.WatchSession) send
// EXAMINE, NOTIFY and IDLE only; every pass it starts is the ordinary one.
type WatchWorker struct {
	river.WorkerDefaults[jobs.Watch]
	deps Dependencies
}

// Timeout implements river.Worker: the watch bounds itself (WatchLifetime,
// extended only by a degradation, itself at most a day).
func (w *WatchWorker) Timeout(*river.Job[jobs.Watch]) time.Duration {
	return w.deps.watchLifetime() + 25*time.Hour
}

// NextRetry implements river.Worker: a watch whose attempt failed outside
// the failures it counts itself (the database, say) is tried again soon.
func (w *WatchWorker) NextRetry(*river.Job[jobs.Watch]) time.Time {
	return w.deps.Now().Add(w.deps.deferral())
}

// Work implements river.Worker.
func (w *WatchWorker) Work(ctx context.Context, job *river.Job[jobs.Watch]) error {
	cfg := w.deps.Config
	logger := jobqueue.Annotate(ctx, w.deps.Logger, slog.String("account", job.Args.AccountID))
	account, ok := cfg.Account(job.Args.AccountID)
	if !ok || !cfg.Sync.Enabled || account.Mode != config.ModePush {
		logger.InfoContext(ctx, "the account no longer asks for push synchronization; its watch ends")
		return nil
	}
	// Shutting down ends the watch at once, rather than after the drain
	// timeout: it holds no work that could be lost.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if w.deps.Stopping != nil {
		go func() {
			select {
			case <-w.deps.Stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	wt := &watch{
		deps: w.deps, account: account, key: config.AccountKey(account.ID), logger: logger,
		started: w.deps.Now(), degraded: map[string]time.Time{},
	}
	err := wt.run(ctx)
	if ctx.Err() != nil {
		// Stopping, or the attempt's own end: come back at once, on
		// whichever process fetches the row.
		return river.JobSnooze(0)
	}
	return err
}

// watchedFolder is one bound folder of the account.
type watchedFolder struct {
	alias, path string
}

// watch is one attempt of a watch job.
type watch struct {
	deps    Dependencies
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

// errRearm ends an attempt at its lifetime.
var errRearm = errors.New("watch lifetime reached")

func (wt *watch) sync() config.Sync { return wt.deps.Config.Sync }

// run is the attempt: it returns river.JobSnooze when the watch re-arms or
// degrades, or the context's error.
func (wt *watch) run(ctx context.Context) error {
	failures := 0
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		if failures == 0 && wt.expired() {
			return river.JobSnooze(0)
		}
		folders, err := wt.boundFolders(ctx)
		if err != nil {
			return err
		}
		if len(folders) == 0 {
			// The account run has not bound a folder.
			return river.JobSnooze(wt.deps.deferral())
		}
		sess, err := wt.open(ctx, watchOperation)
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if failures, err = wt.subscriptionFailed(ctx, failures, err, folders); err != nil {
				return err
			}
			continue
		}
		now := wt.deps.Now()
		period := wt.sync().PushDegradationPeriod
		switch {
		case !sess.CanIdle():
			_ = sess.Close()
			wt.logger.WarnContext(ctx, "mail server advertises no IDLE capability, so the account's folders are synchronized by polling",
				slog.Duration("push_retried_in", period))
			wt.setModes(ctx, folders, mailstore.ModePolling)
			return river.JobSnooze(period)
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
			return river.JobSnooze(0)
		}
		if err != nil {
			return err
		}
	}
}

// expired reports whether the attempt has reached its lifetime with no
// folder degraded.
func (wt *watch) expired() bool {
	if wt.deps.Now().Sub(wt.started) < wt.deps.watchLifetime() {
		return false
	}
	wt.mu.Lock()
	defer wt.mu.Unlock()
	now := wt.deps.Now()
	for _, until := range wt.degraded {
		if now.Before(until) {
			return false
		}
	}
	return true
}

// subscribe runs one subscription over sess, which has just been
// established and can subscribe, until it fails, its secrets rotate or the
// attempt reaches its lifetime. It returns the consecutive failures.
func (wt *watch) subscribe(ctx context.Context, sess *imapx.WatchSession, folders []watchedFolder, failures int) (int, error) {
	s := wt.sync()
	n := min(len(folders), s.MaxSubscribedFolders)
	subscribed, rest := folders[:n], folders[n:]
	paths := make([]string, len(subscribed))
	for i, f := range subscribed {
		paths[i] = f.path
	}
	digest := wt.secretsDigest(ctx)
	err := sess.Subscribe(ctx, paths)
	if errors.Is(err, imapx.ErrSubscriptionDeclined) {
		_ = sess.Close()
		wt.declinedUntil = wt.deps.Now().Add(s.PushDegradationPeriod)
		wt.logger.InfoContext(ctx, "mail server declined the push subscription, so each folder is watched over a connection of its own",
			slog.Int("folders", len(subscribed)), slog.Duration("subscription_retried_in", s.PushDegradationPeriod))
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
	wt.deps.Push.addConnections(wt.account.ID, 1)
	defer wt.deps.Push.addConnections(wt.account.ID, -1)
	// What changed while nothing watched is read now.
	wt.catchUp(ctx, subscribed)

	for {
		changed, err := sess.Wait(ctx, s.PushRenewalInterval)
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

// subscriptionFailed counts one failure of the account's subscription, or
// of the connection it starts from. At MaxConsecutivePushFailures the
// whole account is synchronized by polling for PushDegradationPeriod —
// without a connection per folder, which would ask a failing server for
// more connections — and the watch snoozes that long.
func (wt *watch) subscriptionFailed(ctx context.Context, failures int, cause error, folders []watchedFolder) (int, error) {
	failures++
	s := wt.sync()
	wt.logger.InfoContext(ctx, "push subscription failed", slog.Int("consecutive_failures", failures), slog.String("error", cause.Error()))
	if failures < s.MaxConsecutivePushFailures {
		return failures, sleep(ctx, retryDelay(failures))
	}
	wt.logger.WarnContext(ctx, "push subscription failed too many times in a row, so its folders are synchronized by polling",
		slog.Int("consecutive_failures", failures), slog.Duration("polling_for", s.PushDegradationPeriod))
	wt.setModes(ctx, folders, mailstore.ModePolling)
	return 0, river.JobSnooze(s.PushDegradationPeriod)
}

// perFolder watches every folder over a session of its own until until or
// the attempt's lifetime, whichever comes first, and returns nil then; or
// the context's error.
func (wt *watch) perFolder(ctx context.Context, folders []watchedFolder, until time.Time) error {
	end := until
	// The lifetime shortens the cycle only while it lies ahead: once it has
	// passed with a folder still degraded, the cycle runs to until, so the
	// watch does not reconnect in a loop waiting for the degradation.
	if life := wt.started.Add(wt.deps.watchLifetime()); life.After(wt.deps.Now()) && life.Before(end) {
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

// watchFolder keeps one folder watched over a session of its own until ctx
// ends.
func (wt *watch) watchFolder(ctx context.Context, f watchedFolder) {
	s := wt.sync()
	failures := 0
	for ctx.Err() == nil {
		if until, ok := wt.degradedUntil(f.alias); ok {
			_ = sleep(ctx, until.Sub(wt.deps.Now()))
			continue
		}
		digest := wt.secretsDigest(ctx)
		sess, err := wt.open(ctx, f.alias)
		if err == nil && !sess.CanIdle() {
			_ = sess.Close()
			wt.logger.WarnContext(ctx, "mail server advertises no IDLE capability, so the folder is synchronized by polling",
				slog.String("alias", f.alias), slog.Duration("push_retried_in", s.PushDegradationPeriod))
			wt.degrade(ctx, f, s.PushDegradationPeriod)
			continue
		}
		if err == nil {
			if err = sess.WatchFolder(ctx, f.path); err != nil {
				_ = sess.Close()
			}
		}
		if err != nil {
			failures = wt.folderFailed(ctx, f, failures, err)
			continue
		}
		wt.setModes(ctx, []watchedFolder{f}, mailstore.ModePush)
		wt.deps.Push.addConnections(wt.account.ID, 1)
		wt.catchUp(ctx, []watchedFolder{f})
		for {
			changed, err := sess.Wait(ctx, s.PushRenewalInterval)
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
		wt.deps.Push.addConnections(wt.account.ID, -1)
	}
}

// folderFailed counts one failure of a folder's own session; at
// MaxConsecutivePushFailures the folder is degraded to polling for
// PushDegradationPeriod. A failure that is the context ending counts
// nothing.
func (wt *watch) folderFailed(ctx context.Context, f watchedFolder, failures int, cause error) int {
	if ctx.Err() != nil {
		return failures
	}
	failures++
	s := wt.sync()
	wt.logger.InfoContext(ctx, "push session failed", slog.String("alias", f.alias),
		slog.Int("consecutive_failures", failures), slog.String("error", cause.Error()))
	if failures < s.MaxConsecutivePushFailures {
		_ = sleep(ctx, retryDelay(failures))
		return failures
	}
	wt.logger.WarnContext(ctx, "push session failed too many times in a row, so the folder is synchronized by polling",
		slog.String("alias", f.alias), slog.Int("consecutive_failures", failures), slog.Duration("polling_for", s.PushDegradationPeriod))
	wt.degrade(ctx, f, s.PushDegradationPeriod)
	return 0
}

func (wt *watch) degrade(ctx context.Context, f watchedFolder, period time.Duration) {
	wt.mu.Lock()
	wt.degraded[f.alias] = wt.deps.Now().Add(period)
	wt.mu.Unlock()
	wt.setModes(ctx, []watchedFolder{f}, mailstore.ModePolling)
}

func (wt *watch) degradedUntil(alias string) (time.Time, bool) {
	wt.mu.Lock()
	defer wt.mu.Unlock()
	until, ok := wt.degraded[alias]
	if ok && !wt.deps.Now().Before(until) {
		delete(wt.degraded, alias)
		return time.Time{}, false
	}
	return until, ok
}

// reported starts a pass for every watched folder in changed (paths).
func (wt *watch) reported(ctx context.Context, watched []watchedFolder, changed []string) error {
	for _, path := range changed {
		for _, f := range watched {
			if f.path != path && !(path == "INBOX" && strings.EqualFold(f.path, path)) {
				continue
			}
			wt.logger.InfoContext(ctx, "mail server reported a change in a watched folder", slog.String("alias", f.alias))
			wt.deps.Push.notified(wt.account.ID, f.alias)
			if err := wt.requestPass(ctx, f.alias, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp queues a pass for each folder, as a session starts watching
// them: a change made while nothing watched would otherwise wait for the
// interval. A pass already queued or running is left as it is.
func (wt *watch) catchUp(ctx context.Context, folders []watchedFolder) {
	for _, f := range folders {
		if err := wt.requestPass(ctx, f.alias, false); err != nil && ctx.Err() == nil {
			wt.logger.WarnContext(ctx, "could not queue the folder's pass", slog.String("alias", f.alias), slog.String("error", err.Error()))
		}
	}
}

// requestPass queues alias's pass to run now. With report it also leaves
// the mark a running pass reads before it completes, and makes a pass
// waiting out a retry due now.
func (wt *watch) requestPass(ctx context.Context, alias string, report bool) error {
	client := river.ClientFromContext[pgx.Tx](ctx)
	return pgx.BeginFunc(ctx, wt.deps.Pool, func(tx pgx.Tx) error {
		if report {
			if err := mailstore.ReportChange(ctx, tx, wt.key, alias, wt.deps.Now()); err != nil {
				return err
			}
		}
		res, err := client.InsertTx(ctx, tx, jobs.FolderPass{AccountID: wt.account.ID, Alias: alias}, nil)
		if err != nil {
			return fmt.Errorf("watch: queue the folder's pass: %w", err)
		}
		if report && res.UniqueSkippedAsDuplicate {
			_, err = jobqueue.MakeFolderPassDue(ctx, tx, jobs.FolderPass{}.Kind(), wt.key, alias)
		}
		return err
	})
}

// boundFolders returns the account's bound folders, waiting a little for
// the account's first run to bind them: a watch inserted as the process
// starts usually runs before that run has committed its bindings.
func (wt *watch) boundFolders(ctx context.Context) ([]watchedFolder, error) {
	for wait := 0; ; wait++ {
		folders, err := wt.folders(ctx)
		if err != nil || len(folders) > 0 || wait >= 60 {
			return folders, err
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// folders returns the account's bound folders in configuration order.
func (wt *watch) folders(ctx context.Context) ([]watchedFolder, error) {
	id, err := mailstore.EnsureAccount(ctx, wt.deps.Pool, wt.key)
	if err != nil {
		return nil, err
	}
	var out []watchedFolder
	for _, f := range wt.account.Folders {
		b, ok, err := mailstore.LatestBinding(ctx, wt.deps.Pool, id, f.Alias)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, watchedFolder{alias: b.Alias, path: b.RemotePath})
		}
	}
	return out, nil
}

// open establishes a watching session under the account's
// MailboxSessionEstablishment pipeline, with the account's secrets
// resolved afresh.
func (wt *watch) open(ctx context.Context, operation string) (*imapx.WatchSession, error) {
	ep, err := mailendpoint.Endpoint(ctx, wt.account, wt.deps.endpointEnv())
	if err != nil {
		return nil, err
	}
	key := resilience.Key{Class: resilience.MailboxSessionEstablishment, Instance: wt.key}
	wt.opening.Lock()
	defer wt.opening.Unlock()
	var sess *imapx.WatchSession
	err = wt.deps.Resilience.Execute(ctx, key, operation, func(ctx context.Context) error {
		s, err := wt.deps.OpenWatch(ctx, ep)
		if err != nil {
			return err
		}
		if sess != nil {
			_ = sess.Close()
		}
		sess = s
		return ctx.Err()
	})
	if err != nil {
		if sess != nil {
			_ = sess.Close()
		}
		return nil, err
	}
	return sess, nil
}

// setModes records mode for folders and logs each folder whose mode
// changed.
func (wt *watch) setModes(ctx context.Context, folders []watchedFolder, mode string) {
	for _, f := range folders {
		wt.setMode(ctx, f, mode)
	}
}

// setMode records mode for f, logs it when it changed and reports whether
// it did.
func (wt *watch) setMode(ctx context.Context, f watchedFolder, mode string) bool {
	wt.deps.Push.setMode(wt.account.ID, f.alias, mode)
	changed, err := mailstore.SetEffectiveMode(context.WithoutCancel(ctx), wt.deps.Pool, wt.key, f.alias, mode)
	if err != nil {
		wt.logger.WarnContext(ctx, "could not record the folder's effective mode", slog.String("alias", f.alias), slog.String("error", err.Error()))
		return false
	}
	if changed {
		wt.logger.InfoContext(ctx, "folder is now synchronized in "+strings.ToLower(mode)+" mode", slog.String("alias", f.alias), slog.String("mode", mode))
	}
	return changed
}

// secretsDigest digests the material behind the account's configured
// secret references — password, refresh token, trust anchor — as they
// resolve now. The digest is kept in memory only. A reference that does
// not resolve contributes its failure, so a secret that disappears is a
// change too.
func (wt *watch) secretsDigest(ctx context.Context) [sha256.Size]byte {
	h := sha256.New()
	a := wt.account
	for _, ref := range []secret.Reference{a.Password, a.OAuth.RefreshToken, a.TransportSecurity.TrustedCertificateAuthority} {
		if ref.IsZero() {
			h.Write([]byte{0})
			continue
		}
		b, err := wt.deps.Resolver.Resolve(ctx, ref)
		if err != nil {
			h.Write([]byte{1})
			continue
		}
		h.Write([]byte{2})
		_, _ = fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
		clear(b)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// rotated reports whether the account's secrets changed since digest was
// taken: the session opened with them is then closed and reopened, so a
// revoked credential never outlives the file it came from.
func (wt *watch) rotated(ctx context.Context, digest [sha256.Size]byte) bool {
	return wt.secretsDigest(ctx) != digest
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
