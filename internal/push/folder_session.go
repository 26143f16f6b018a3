package push

import (
	"context"
	"log/slog"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// folderSessions are an attempt's per-folder sessions: one goroutine per
// watched folder, each holding a session of its own (watchFolder). They
// are the fallback for a server that offers IDLE but no NOTIFY, or
// declined a subscription; they never subscribe.
type folderSessions struct {
	wt *watch
	// bounded is set when the server declined a subscription: only as
	// many folders as a subscription would name are watched, in
	// configuration order, the rest polled. A server without NOTIFY has
	// every folder watched.
	bounded bool
	running map[watchedFolder]*folderRun
}

// folderRun is one folder's running session.
type folderRun struct {
	cancel context.CancelFunc
	done   chan struct{}
}

// active reports whether any folder is watched by a session of its own.
func (fs *folderSessions) active() bool { return len(fs.running) > 0 }

// sync makes folders exactly the ones watched one connection each: a
// session is started, under ctx (the attempt's), for each folder not yet
// watched, and the session of each folder no longer among them — one the
// latest run no longer resolves, or resolves to another binding — is
// stopped. Sessions of folders that stay are left as they are.
func (fs *folderSessions) sync(ctx context.Context, folders []watchedFolder) {
	want := make(map[watchedFolder]bool, len(folders))
	for _, f := range folders {
		want[f] = true
	}
	for f, r := range fs.running {
		if !want[f] {
			r.cancel()
			<-r.done
			delete(fs.running, f)
		}
	}
	for _, f := range folders {
		if _, ok := fs.running[f]; ok {
			continue
		}
		fctx, cancel := context.WithCancel(ctx)
		r := &folderRun{cancel: cancel, done: make(chan struct{})}
		fs.running[f] = r
		go func() {
			defer close(r.done)
			fs.wt.watchFolder(fctx, f)
		}()
	}
}

// stop ends every per-folder session and waits for them.
func (fs *folderSessions) stop() {
	for _, r := range fs.running {
		r.cancel()
	}
	for f, r := range fs.running {
		<-r.done
		delete(fs.running, f)
	}
}

// watchEach watches folders one connection each — all of them, or, when
// the server declined a subscription, as many as a subscription would name
// (the rest are polled, and logged as past the bound) — and stops the
// sessions of folders no longer among them.
func (wt *watch) watchEach(ctx context.Context, sessions *folderSessions, folders []watchedFolder) {
	if sessions.bounded {
		n := min(len(folders), wt.lim.MaxSubscribedFolders)
		folders, rest := folders[:n], folders[n:]
		sessions.sync(ctx, folders)
		wt.pastBound(ctx, rest)
		return
	}
	sessions.sync(ctx, folders)
}

// pastBound records folders, past the subscription's bound, as polled,
// and logs each one that was not already.
func (wt *watch) pastBound(ctx context.Context, folders []watchedFolder) {
	for _, f := range folders {
		if wt.setMode(ctx, f, mailstore.ModePolling) {
			wt.logger.InfoContext(ctx, "folder is past the subscription's bound (MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS), so it is synchronized by polling",
				slog.String("alias", f.alias), slog.Int("max_subscribed_folders", wt.lim.MaxSubscribedFolders))
		}
	}
}

// watchFolder keeps one folder watched over a session of its own (IDLE on
// the folder, examined) until ctx ends. A session that starts queues the
// folder's pass only when the folder changed since its last completed
// pass (catchUp). Its failures degrade this folder alone (folderFailed); a
// database failure while reporting ends the session, which is reopened,
// rather than the attempt.
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
		var state imapx.FolderState
		if err == nil {
			if state, err = sess.WatchFolder(ctx, f.path); err != nil {
				_ = sess.Close()
			}
		}
		if err != nil {
			failures = wt.folderFailed(ctx, f, failures, err)
			continue
		}
		wt.setModes(ctx, []watchedFolder{f}, mailstore.ModePush)
		wt.opts.Metrics.addConnections(wt.account.ID, 1)
		wt.catchUp(ctx, []watchedFolder{f}, map[string]imapx.FolderState{f.path: state})
		for {
			changed, err := wt.wait(ctx, sess)
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

// wait runs one wait of sess (imapx.WatchSession.Wait) for at most the
// renewal interval. A wait the server ended sooner than MinWait without
// reporting a change in a watched folder is ErrWaitEndedEarly: it proves
// nothing, and counting it as a wait that returned would have the watch
// ask again at once, for as long as the server answers that way.
func (wt *watch) wait(ctx context.Context, sess *imapx.WatchSession) ([]string, error) {
	start := wt.opts.Now()
	changed, err := sess.Wait(ctx, wt.lim.RenewalInterval)
	if err == nil && len(changed) == 0 && wt.opts.Now().Sub(start) < MinWait {
		return nil, ErrWaitEndedEarly
	}
	return changed, err
}
