package push_test

import (
	"cmp"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/push"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
	"github.com/mailfathom/mailfathom/internal/testharness/oauthtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
	"github.com/mailfathom/mailfathom/jobs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The tests in this file use a scripted server (package imapscript) for
// the answers Dovecot cannot be made to give: it accepts every NOTIFY SET a
// watch sends, however many folders it names, so it never declines a
// subscription; it answers IDLE at once whenever it accepted the
// connection, so it never accepts a session and then leaves a wait
// unanswered, nor ends every IDLE as soon as it began; and it reports a
// folder's numbers only as the test chooses. The database is a real one.

type testBundle struct {
	pool    *pgxpool.Pool
	logs    *capture.Buffer
	account config.Account
	lim     push.Limits
	opts    push.Options
	script  *watchScript
	server  *imapscript.Server

	mu     sync.Mutex
	queued []jobs.FolderPass
}

// setup starts a scripted server answering NOTIFY SET with notify and IDLE
// with idle, and returns a watch of a push account on it whose folders
// INBOX and ARCHIVE are bound, which degrades after two failures in a row
// for ten seconds and renews its waits every two.
func setup(t *testing.T, notify, idle func(c *imapscript.Conn, tag string)) (context.Context, *testBundle) {
	t.Helper()
	return setupScript(t, &watchScript{notify: func(c *imapscript.Conn, tag, _ string) { notify(c, tag) }, idle: idle})
}

// setupScript is setup on the server w scripts; env edits the account's
// configuration.
func setupScript(t *testing.T, w *watchScript, env ...string) (context.Context, *testBundle) {
	t.Helper()
	ctx := context.Background()
	srv := imapscript.Start(t, w.script())
	pw := filepath.Join(t.TempDir(), "imap-password")
	require.NoError(t, os.WriteFile(pw, []byte("secret\n"), 0o600))
	vars := map[string]string{
		"MAILFATHOM_SYNC_ENABLED":                                                           "true",
		"MAILFATHOM_SYNC_MAX_CONSECUTIVE_PUSH_FAILURES":                                     "2",
		"MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD":                                           "10s",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_MAX_ATTEMPTS":                  "1",
		"MAILFATHOM_ACCOUNTS_0_ID":                                                          "primary",
		"MAILFATHOM_ACCOUNTS_0_MODE":                                                        "Push",
		"MAILFATHOM_ACCOUNTS_0_HOST":                                                        srv.Host(),
		"MAILFATHOM_ACCOUNTS_0_PORT":                                                        srv.PortText(),
		"MAILFATHOM_ACCOUNTS_0_USERNAME":                                                    "someone",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD":                                                    "file:" + pw,
		"MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY":                                         "None",
		"MAILFATHOM_ACCOUNTS_0_ALLOW_INSECURE_CONNECTION":                                   "true",
		"MAILFATHOM_ACCOUNTS_0_ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION": "true",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS":                                             "inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE":                                       "Inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS":                                             "archive",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH":                                       "Archive",
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		if v == "" {
			delete(vars, k)
			continue
		}
		vars[k] = v
	}
	var environ []string
	for k, v := range vars {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(environ)
	require.NoError(t, err)
	account, ok := cfg.Account("primary")
	require.True(t, ok)
	b := &testBundle{pool: dbtest.Pool(t), logs: &capture.Buffer{}, account: account, script: w, server: srv}
	logger := b.logs.Logger()
	registry, err := outbound.NewRegistry(cfg.Resilience, logger, nil)
	require.NoError(t, err)
	b.lim = push.Limits{
		MaxSubscribedFolders: cfg.Sync.MaxSubscribedFolders,
		// Below the one minute configuration accepts, so that a test sees
		// several renewals.
		RenewalInterval:        2 * time.Second,
		MaxConsecutiveFailures: cfg.Sync.MaxConsecutivePushFailures,
		DegradationPeriod:      cfg.Sync.PushDegradationPeriod,
	}
	resolver := &secret.Resolver{}
	tokens, err := mailoauth.NewSource(mailoauth.Options{Resolver: resolver, Registry: registry, Logger: logger})
	require.NoError(t, err)
	b.opts = push.Options{
		Pool: b.pool,
		Env:  mailendpoint.Env{Mode: cfg.SecretInterpretationMode, Resolver: resolver, Registry: registry, Tokens: tokens},
		Open: func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
			return imapx.OpenWatchSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 3 * time.Second})
		},
		QueuePass: func(_ context.Context, _ pgx.Tx, pass jobs.FolderPass) (bool, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.queued = append(b.queued, pass)
			return false, nil
		},
		// Polls in a second rather than the five production waits, so a
		// test sees a run's new resolutions followed at once.
		Resolutions: push.NewResolutions(b.pool, time.Second),
		Logger:      logger,
	}
	// The account run's folder discovery has no script: bind the folders
	// as it would.
	b.resolve(t, map[string]string{"INBOX": "INBOX", "ARCHIVE": "Archive"})
	return ctx, b
}

// resolve commits what an account run would that resolved each alias of
// paths to its path, and each other configured alias to no folder.
func (b *testBundle) resolve(t *testing.T, paths map[string]string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		key := config.AccountKey(b.account.ID)
		id, err := mailstore.EnsureAccount(ctx, tx, key)
		if err != nil {
			return err
		}
		var rs []mailstore.Resolution
		for _, f := range b.account.Folders {
			path, ok := paths[f.Alias]
			if !ok {
				rs = append(rs, mailstore.Resolution{Alias: f.Alias, Failure: "FolderAliasUnresolved"})
				continue
			}
			bound, _, _, err := mailstore.CommitBinding(ctx, tx, id, f.Alias, path, "/")
			if err != nil {
				return err
			}
			rs = append(rs, mailstore.Resolution{Alias: f.Alias, BindingID: bound.ID})
		}
		_, err = mailstore.RecordResolutions(ctx, tx, key, rs)
		return err
	}))
}

// countLog counts the log lines whose message is msg and whose attributes
// include kv (compared as their JSON encodings).
func (b *testBundle) countLog(msg string, kv ...any) int {
	n := 0
	for _, raw := range strings.Split(b.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) != nil || m["msg"] != msg {
			continue
		}
		ok := true
		for i := 0; i+1 < len(kv); i += 2 {
			want, _ := json.Marshal(kv[i+1])
			got, _ := json.Marshal(m[kv[i].(string)])
			ok = ok && string(want) == string(got)
		}
		if ok {
			n++
		}
	}
	return n
}

// modeLine is the message saying a folder is now synchronized in mode.
func modeLine(mode string) string {
	return "folder is now synchronized in " + strings.ToLower(mode) + " mode"
}

// watchScript is a server that authenticates anyone, advertises caps
// (default IDLE and NOTIFY), answers EXAMINE with examine's lines (default
// an empty folder of UIDVALIDITY 7) and LOGOUT with BYE, and hands NOTIFY
// and IDLE, with their tags (and NOTIFY's whole line), to notify and idle;
// anything else is BAD. It records what every connection was sent.
type watchScript struct {
	caps string
	// login, when set, answers the authentication of connection conn
	// (from 1) with the tagged line it returns after the tag; "" is the
	// ordinary OK.
	login   func(conn int) string
	examine func(path string) []string
	notify  func(c *imapscript.Conn, tag, line string)
	idle    func(c *imapscript.Conn, tag string)

	mu          sync.Mutex
	conns       int
	notifys     []time.Time
	notifyLines []string
	idles       []time.Time
	// examined is the path of every EXAMINE, with the connection (from 1,
	// in the order they were accepted) it came over; loggedOut the
	// connections that sent LOGOUT, ended those that are over.
	examined  []examine
	loggedOut map[int]bool
	ended     map[int]bool
}

type examine struct {
	conn int
	path string
}

func (w *watchScript) script() imapscript.Script {
	caps := cmp.Or(w.caps, "IMAP4rev1 IDLE NOTIFY")
	return func(c *imapscript.Conn) {
		w.mu.Lock()
		w.conns++
		conn := w.conns
		w.mu.Unlock()
		defer func() {
			w.mu.Lock()
			defer w.mu.Unlock()
			if w.ended == nil {
				w.ended = map[int]bool{}
			}
			w.ended[conn] = true
		}()
		c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN AUTH=OAUTHBEARER AUTH=XOAUTH2 " + caps)
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		if w.login != nil {
			if answer := w.login(conn); answer != "" {
				c.Send(tag + " " + answer)
				return
			}
		}
		c.Send(tag + " OK [CAPABILITY " + caps + "] logged in")
		for {
			line, ok := c.ReadLine()
			if !ok {
				return
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch strings.ToUpper(f[1]) {
			case "EXAMINE":
				_, rest, _ := strings.Cut(line, `"`)
				path, _, _ := strings.Cut(rest, `"`)
				w.mu.Lock()
				w.examined = append(w.examined, examine{conn: conn, path: path})
				w.mu.Unlock()
				lines := []string{"* 0 EXISTS", "* OK [UIDVALIDITY 7] ok"}
				if w.examine != nil {
					lines = w.examine(path)
				}
				c.Send(append(lines, f[0]+" OK [READ-ONLY] done")...)
			case "NOTIFY":
				w.mu.Lock()
				w.notifys = append(w.notifys, time.Now())
				w.notifyLines = append(w.notifyLines, line)
				w.mu.Unlock()
				w.notify(c, f[0], line)
			case "IDLE":
				w.mu.Lock()
				w.idles = append(w.idles, time.Now())
				w.mu.Unlock()
				w.idle(c, f[0])
			case "LOGOUT":
				w.mu.Lock()
				if w.loggedOut == nil {
					w.loggedOut = map[int]bool{}
				}
				w.loggedOut[conn] = true
				w.mu.Unlock()
				c.Send("* BYE bye", f[0]+" OK done")
				return
			default:
				c.Send(f[0] + " BAD not scripted")
			}
		}
	}
}

// examinedOver returns the paths every connection EXAMINEd, by connection.
func (w *watchScript) examinedOver() map[int][]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := map[int][]string{}
	for _, e := range w.examined {
		out[e.conn] = append(out[e.conn], e.path)
	}
	return out
}

// idleCount is how many IDLE commands the server read.
func (w *watchScript) idleCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.idles)
}

// notifyCount is how many NOTIFY commands the server read.
func (w *watchScript) notifyCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.notifys)
}

// notifyOK accepts every subscription.
func notifyOK(c *imapscript.Conn, tag, _ string) { c.Send(tag + " OK notifying") }

// idleOK serves IDLE as a quiet server does: a continuation, and the
// completion once the client says DONE.
func idleOK(c *imapscript.Conn, tag string) {
	c.Send("+ idling")
	if line, ok := c.ReadLine(); ok && strings.EqualFold(line, "DONE") {
		c.Send(tag + " OK idle done")
	}
}

// TestRunCountNotResetByConnect: a server that accepts every connection
// and subscription and then never answers IDLE fails each wait; the
// successful connects in between do not clear the count, so the bound is
// reached, the account degrades, and the attempt ends polling for the
// degradation period.
func TestRunCountNotResetByConnect(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t, func(c *imapscript.Conn, tag string) { c.Send(tag + " OK notifying") },
		func(c *imapscript.Conn, tag string) {
			for { // never answers
				if _, ok := c.ReadLine(); !ok {
					return
				}
			}
		})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := push.Run(ctx, b.account, b.lim, b.opts)
	require.NoError(t, err, "logs:\n%s", b.logs.String())
	require.Equal(t, push.End{Reason: push.Polling, For: 10 * time.Second}, end)
	require.Equal(t, 1, b.countLog("push subscription failed", "consecutive_failures", 1))
	require.Equal(t, 1, b.countLog("push subscription failed", "consecutive_failures", 2))
	require.Equal(t, 1, b.countLog("push subscription failed too many times in a row, so its folders are synchronized by polling",
		"consecutive_failures", 2, "polling_for", 10*time.Second))
	require.Equal(t, 1, b.countLog(modeLine("Polling"), "alias", "INBOX", "mode", "Polling"))
	require.Equal(t, 1, b.countLog(modeLine("Polling"), "alias", "ARCHIVE", "mode", "Polling"))
	b.script.mu.Lock()
	defer b.script.mu.Unlock()
	require.Len(t, b.script.notifys, 2, "both failed waits followed a subscription the server accepted")
	require.Equal(t, 2, b.countLog("account watches its folders through one push subscription", "folders", 2))
}

// TestRunDeclinedSubscriptionWatchesEachFolder: a server that declines
// the subscription gets one session per folder in the meantime, logged at
// information level as a working mode, and is asked for a subscription
// again once the degradation period has passed.
func TestRunDeclinedSubscriptionWatchesEachFolder(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t, func(c *imapscript.Conn, tag string) {
		c.Send(tag + " NO [NOTIFICATIONOVERFLOW] too many mailboxes")
	}, idleOK)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := push.Run(ctx, b.account, b.lim, b.opts)
		done <- err
	}()
	const declined = "mail server declined the push subscription, so each folder is watched over a connection of its own"
	b.waitFor(t, 30*time.Second, "the subscription was asked for again", func() bool {
		return b.countLog(declined, "folders", 2, "subscription_retried_in", 10*time.Second, "level", "INFO") >= 2
	})
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	b.script.mu.Lock()
	defer b.script.mu.Unlock()
	require.GreaterOrEqual(t, len(b.script.notifys), 2)
	require.GreaterOrEqual(t, b.script.notifys[1].Sub(b.script.notifys[0]), 9*time.Second, "asked again after the period, not before")
	require.NotEmpty(t, b.script.idles, "the folders were watched one session each in the meantime")
	require.Zero(t, b.countLog("push subscription failed"), "a declined subscription is not a failure")
	require.Equal(t, 1, b.countLog(modeLine("Push"), "alias", "INBOX", "mode", "Push"))
	require.Equal(t, 1, b.countLog(modeLine("Push"), "alias", "ARCHIVE", "mode", "Push"))
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Contains(t, b.queued, jobs.FolderPass{AccountID: "primary", Alias: "INBOX"}, "a session that starts watching catches up")
	require.Contains(t, b.queued, jobs.FolderPass{AccountID: "primary", Alias: "ARCHIVE"}, "a session that starts watching catches up")
}

// idleEndsAtOnce serves IDLE as a server that ends every wait as soon as
// it began: a continuation and, without waiting for DONE, the completion.
func idleEndsAtOnce(c *imapscript.Conn, tag string) { c.Send("+ idling", tag+" OK idle done") }

// run runs one attempt of b's watch under ctx in the background; wait
// returns how it ended.
func (b *testBundle) run(ctx context.Context, opts push.Options) (wait func() (push.End, error)) {
	type result struct {
		end push.End
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := push.Run(ctx, b.account, b.lim, opts)
		done <- result{end, err}
	}()
	return func() (push.End, error) {
		r := <-done
		return r.end, r.err
	}
}

// waitFor polls cond until it holds, for at most within.
func (b *testBundle) waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	poll.Until(t, within, what, func() (bool, string) { return cond(), "logs:\n" + b.logs.String() })
}

// queuedFor counts the passes queued for alias.
func (b *testBundle) queuedFor(alias string) int {
	b.mu.Lock()
	defer b.mu.Unlock()
	n := 0
	for _, p := range b.queued {
		if p.Alias == alias {
			n++
		}
	}
	return n
}

// TestRunWaitEndedAtOnceFailsTheSubscription: a server that ends every
// IDLE as soon as it began proves nothing; each such wait counts as a
// failure, the watch pauses before asking again, and at the bound the
// account degrades — after as many IDLE commands as failures, not a loop
// of them.
func TestRunWaitEndedAtOnceFailsTheSubscription(t *testing.T) {
	t.Parallel()
	ctx, b := setupScript(t, &watchScript{notify: notifyOK, idle: idleEndsAtOnce})
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	end, err := push.Run(ctx, b.account, b.lim, b.opts)
	require.NoError(t, err, "logs:\n%s", b.logs.String())
	require.Equal(t, push.End{Reason: push.Polling, For: 10 * time.Second}, end)
	require.Equal(t, 1, b.countLog("push subscription failed", "consecutive_failures", 1, "error", push.ErrWaitEndedEarly.Error()))
	require.Equal(t, 1, b.countLog("push subscription failed too many times in a row, so its folders are synchronized by polling",
		"consecutive_failures", 2, "level", "WARN"))
	b.script.mu.Lock()
	defer b.script.mu.Unlock()
	require.Len(t, b.script.idles, 2, "one IDLE per failure")
	require.GreaterOrEqual(t, b.script.idles[1].Sub(b.script.idles[0]), 900*time.Millisecond, "a pause before the IDLE is asked for again")
}

// TestRunWaitEndedAtOnceDegradesTheFolder: the same server without NOTIFY
// has each folder watched over a connection of its own; each folder's
// session fails its waits, pauses, and degrades to polling at the bound
// with its warning, after which its IDLE is not asked for again.
func TestRunWaitEndedAtOnceDegradesTheFolder(t *testing.T) {
	t.Parallel()
	ctx, b := setupScript(t, &watchScript{caps: "IMAP4rev1 IDLE", idle: idleEndsAtOnce})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := b.run(ctx, b.opts)
	const degraded = "push session failed too many times in a row, so the folder is synchronized by polling"
	b.waitFor(t, 30*time.Second, "both folders degrade", func() bool {
		return b.countLog(degraded, "alias", "INBOX", "consecutive_failures", 2, "level", "WARN") == 1 &&
			b.countLog(degraded, "alias", "ARCHIVE", "consecutive_failures", 2, "level", "WARN") == 1
	})
	idles := b.script.idleCount()
	// Past the pause after which a failing folder asks for IDLE again; nothing marks that it does not.
	time.Sleep(2 * time.Second)
	require.Equal(t, idles, b.script.idleCount(), "a degraded folder's IDLE is not asked for again")
	require.Equal(t, 4, idles, "one IDLE per failure, two folders")
	require.Equal(t, 1, b.countLog(modeLine("Polling"), "alias", "INBOX"))
	require.Equal(t, 1, b.countLog(modeLine("Polling"), "alias", "ARCHIVE"))
	cancel()
	_, err := wait()
	require.ErrorIs(t, err, context.Canceled)
}

// described is a folder as the scripted server describes it, in EXAMINE
// and in STATUS.
var described = mailstore.ObservedState{UIDValidity: 7, UIDNext: 4, Exists: 3, HighestModSeq: 9}

// examineDescribed answers EXAMINE with described.
func examineDescribed(string) []string {
	return []string{"* 3 EXISTS", "* OK [UIDVALIDITY 7] ok", "* OK [UIDNEXT 4] ok", "* OK [HIGHESTMODSEQ 9] ok"}
}

// notifyDescribed accepts a subscription and, when asked with the STATUS
// indicator, describes every folder it names but the open one as
// described.
func notifyDescribed(c *imapscript.Conn, tag, line string) {
	if strings.Contains(line, "SET STATUS ") {
		if _, others, ok := strings.Cut(line, "(mailboxes ("); ok {
			names, _, _ := strings.Cut(others, ")")
			for _, name := range strings.Fields(names) {
				c.Send("* STATUS " + name + " (MESSAGES 3 UIDNEXT 4 UIDVALIDITY 7 UNSEEN 0 HIGHESTMODSEQ 9)")
			}
		}
	}
	c.Send(tag + " OK notifying")
}

// observe records what a completed pass of alias would have observed of
// its folder: st, under the alias's current binding.
func (b *testBundle) observe(t *testing.T, alias string, st mailstore.ObservedState) {
	t.Helper()
	ctx := context.Background()
	id, err := mailstore.EnsureAccount(ctx, b.pool, config.AccountKey(b.account.ID))
	require.NoError(t, err)
	binding, ok, err := mailstore.LatestBinding(ctx, b.pool, id, alias)
	require.NoError(t, err)
	require.True(t, ok)
	st.BindingID = binding.ID
	require.NoError(t, mailstore.RecordObservedState(ctx, b.pool, config.AccountKey(b.account.ID), alias, st))
}

// TestRunCatchesUpOnlyWhatChanged: a session that starts watching a
// folder queues its pass only when what the server reports of it differs
// from what its last completed pass observed. INBOX is as its pass left
// it; ARCHIVE has new mail. Across several re-armed attempts — each one a
// set of new connections — only ARCHIVE is caught up, once per attempt,
// over one connection per folder and over a subscription alike.
func TestRunCatchesUpOnlyWhatChanged(t *testing.T) {
	t.Parallel()
	for name, w := range map[string]func() *watchScript{
		"one connection per folder": func() *watchScript {
			return &watchScript{caps: "IMAP4rev1 IDLE", examine: examineDescribed, idle: idleOK}
		},
		"subscription": func() *watchScript {
			return &watchScript{examine: examineDescribed, notify: notifyDescribed, idle: idleOK}
		},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx, b := setupScript(t, w())
			b.observe(t, "INBOX", described)
			older := described
			older.UIDNext, older.Exists = 3, 2
			b.observe(t, "ARCHIVE", older)
			opts := b.opts
			opts.Lifetime = 2 * time.Second
			const attempts = 3
			for i := 1; i <= attempts; i++ {
				end, err := push.Run(ctx, b.account, b.lim, opts)
				require.NoError(t, err, "logs:\n%s", b.logs.String())
				require.Equal(t, push.End{Reason: push.Rearm}, end)
				require.Equal(t, i, b.queuedFor("ARCHIVE"), "the folder that changed is caught up as each attempt starts")
			}
			require.Zero(t, b.queuedFor("INBOX"), "a folder as its last pass left it is left to the interval; logs:\n%s", b.logs.String())
			require.Equal(t, attempts, b.countLog("folder may have changed while it was not watched; its pass is queued", "alias", "ARCHIVE"))
			if name == "subscription" {
				b.script.mu.Lock()
				defer b.script.mu.Unlock()
				require.Contains(t, b.script.notifyLines[0], `NOTIFY SET STATUS (selected`)
			}
		})
	}
}

// TestRunCatchesUpAChangeReportedWithTheSubscription: a message that
// arrives in the open folder between its EXAMINE and NOTIFY SET is
// reported with NOTIFY's answer and never again, so the folder is caught
// up although EXAMINE described it as its last pass left it.
func TestRunCatchesUpAChangeReportedWithTheSubscription(t *testing.T) {
	t.Parallel()
	ctx, b := setupScript(t, &watchScript{examine: examineDescribed, idle: idleOK,
		notify: func(c *imapscript.Conn, tag, line string) {
			c.Send("* 4 EXISTS")
			notifyDescribed(c, tag, line)
		}})
	b.observe(t, "INBOX", described)
	b.observe(t, "ARCHIVE", described)
	opts := b.opts
	opts.Lifetime = 2 * time.Second
	end, err := push.Run(ctx, b.account, b.lim, opts)
	require.NoError(t, err, "logs:\n%s", b.logs.String())
	require.Equal(t, push.End{Reason: push.Rearm}, end)
	require.Equal(t, 1, b.queuedFor("INBOX"), "the open folder's change, reported with the subscription, is caught up; logs:\n%s", b.logs.String())
	require.Zero(t, b.queuedFor("ARCHIVE"), "a folder as its last pass left it is left to the interval")
}

// TestRunDeclinedSubscriptionCostsItsBound: after a server declined a
// subscription, only as many folders as a subscription names are watched
// one connection each, and the rest are polled and logged, in
// configuration order. The decline outlives the attempt: a re-armed
// attempt does not ask again before the degradation period has passed.
// Asking again opens one connection and leaves the session that watches
// alone; once the server subscribes, that session is closed.
func TestRunDeclinedSubscriptionCostsItsBound(t *testing.T) {
	t.Parallel()
	var declining atomic.Bool
	declining.Store(true)
	w := &watchScript{idle: idleOK, notify: func(c *imapscript.Conn, tag, line string) {
		if declining.Load() {
			c.Send(tag + " NO [NOTIFICATIONOVERFLOW] too many mailboxes")
			return
		}
		notifyOK(c, tag, line)
	}}
	ctx, b := setupScript(t, w)
	b.lim.MaxSubscribedFolders = 1
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	// The first attempt is declined and re-arms after its lifetime.
	first := b.opts
	first.Lifetime = 3 * time.Second
	end, err := push.Run(ctx, b.account, b.lim, first)
	require.NoError(t, err, "logs:\n%s", b.logs.String())
	require.Equal(t, push.End{Reason: push.Rearm}, end)
	require.Equal(t, 1, w.notifyCount())
	declinedAt := w.notifys[0]
	require.Equal(t, 1, b.countLog("mail server declined the push subscription, so each folder is watched over a connection of its own", "folders", 1))
	require.Equal(t, 1, b.countLog("folder is past the subscription's bound (MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS), so it is synchronized by polling",
		"alias", "ARCHIVE", "max_subscribed_folders", 1))
	require.Equal(t, 1, b.countLog(modeLine("Push"), "alias", "INBOX"))
	require.Equal(t, 1, b.countLog(modeLine("Polling"), "alias", "ARCHIVE"))
	for conn, paths := range w.examinedOver() {
		require.NotContains(t, paths, "Archive", "connection %d: the folder past the bound is not watched", conn)
	}
	at, err := mailstore.SubscriptionRetryAt(ctx, b.pool, config.AccountKey(b.account.ID))
	require.NoError(t, err)
	require.WithinDuration(t, declinedAt.Add(10*time.Second), at, time.Second, "the decline is recorded")

	// The re-armed attempt watches INBOX again without asking.
	conns := b.server.Connections()
	wait := b.run(ctx, b.opts)
	b.waitFor(t, 5*time.Second, "INBOX is watched again", func() bool { return w.idleCount() > 0 && b.server.Connections() == conns+2 })
	require.Equal(t, 1, w.notifyCount(), "not asked again before the degradation period has passed")

	// Asked again after the period: one connection, declined again; the
	// session watching INBOX stays.
	watching := conns + 2
	b.waitFor(t, 15*time.Second, "asked again", func() bool { return w.notifyCount() == 2 })
	require.GreaterOrEqual(t, w.notifys[1].Sub(declinedAt), 9500*time.Millisecond)
	asking := conns + 3
	b.waitFor(t, 5*time.Second, "the second ask was declined and its connection closed", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ended[asking] && b.countLog("mail server declined the push subscription, so each folder is watched over a connection of its own") == 2
	})
	require.Equal(t, asking, b.server.Connections(), "asking again costs one connection")
	w.mu.Lock()
	require.False(t, w.ended[watching], "the session that watches is not torn down to ask")
	w.mu.Unlock()

	// The server subscribes now: the subscription replaces the session.
	declining.Store(false)
	b.waitFor(t, 15*time.Second, "subscribed", func() bool {
		return b.countLog("account watches its folders through one push subscription", "folders", 1) == 1
	})
	b.waitFor(t, 5*time.Second, "the per-folder session is closed", func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.ended[watching]
	})
	require.Equal(t, conns+4, b.server.Connections())
	require.Equal(t, 1, b.countLog(modeLine("Push"), "alias", "INBOX"), "watched throughout")
	cancel()
	_, err = wait()
	require.ErrorIs(t, err, context.Canceled)
}

// TestRunFollowsTheLatestResolutions: the folders watched are the ones
// the account's latest run resolved, followed while the sessions wait:
// a repointed alias is watched under its new binding and a folder the run
// no longer resolves is left alone and shown as polled — over a
// subscription, which is renewed for the new set, and over one connection
// per folder, where only the sessions concerned change.
func TestRunFollowsTheLatestResolutions(t *testing.T) {
	t.Parallel()
	const notWatched = "folder is not watched: the account's latest run resolved its alias to no folder"

	t.Run("subscription", func(t *testing.T) {
		t.Parallel()
		w := &watchScript{notify: notifyOK, idle: idleOK}
		ctx, b := setupScript(t, w)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wait := b.run(ctx, b.opts)
		lastNotify := func() string {
			w.mu.Lock()
			defer w.mu.Unlock()
			if len(w.notifyLines) == 0 {
				return ""
			}
			return w.notifyLines[len(w.notifyLines)-1]
		}
		b.waitFor(t, 10*time.Second, "subscribed", func() bool { return strings.Contains(lastNotify(), `(mailboxes ("Archive")`) })

		b.resolve(t, map[string]string{"INBOX": "INBOX", "ARCHIVE": "Archive 2026"})
		b.waitFor(t, 10*time.Second, "the repointed alias is subscribed to", func() bool {
			return strings.Contains(lastNotify(), `(mailboxes ("Archive 2026")`)
		})
		require.Equal(t, 1, b.countLog("the account's latest run resolved other folders; its push subscription is renewed for them"))

		b.resolve(t, map[string]string{"INBOX": "INBOX"})
		b.waitFor(t, 10*time.Second, "the unresolved folder is left out", func() bool {
			return w.notifyCount() == 3 && !strings.Contains(lastNotify(), "mailboxes")
		})
		b.waitFor(t, 5*time.Second, "the unresolved alias is shown as polled", func() bool {
			return b.countLog(notWatched, "alias", "ARCHIVE", "failure", "FolderAliasUnresolved") == 1 &&
				b.countLog(modeLine("Polling"), "alias", "ARCHIVE") == 1
		})
		require.Zero(t, b.countLog("push subscription failed"), "following the run is not a failure")
		cancel()
		_, err := wait()
		require.ErrorIs(t, err, context.Canceled)
	})

	t.Run("one connection per folder", func(t *testing.T) {
		t.Parallel()
		w := &watchScript{caps: "IMAP4rev1 IDLE", idle: idleOK}
		ctx, b := setupScript(t, w)
		ctx, cancel := context.WithCancel(ctx)
		defer cancel()
		wait := b.run(ctx, b.opts)
		over := func(path string) (conns []int) {
			for conn, paths := range w.examinedOver() {
				if slices.Contains(paths, path) {
					conns = append(conns, conn)
				}
			}
			return conns
		}
		b.waitFor(t, 10*time.Second, "both folders watched", func() bool { return len(over("INBOX")) == 1 && len(over("Archive")) == 1 })
		inbox, archive := over("INBOX")[0], over("Archive")[0]

		b.resolve(t, map[string]string{"INBOX": "INBOX", "ARCHIVE": "Archive 2026"})
		ended := func(conn int) bool {
			w.mu.Lock()
			defer w.mu.Unlock()
			return w.ended[conn]
		}
		// Well within the degradation period, after which the watch would
		// read its folders again anyway.
		b.waitFor(t, 5*time.Second, "the repointed alias is watched", func() bool {
			return len(over("Archive 2026")) == 1 && ended(archive)
		})
		repointed := over("Archive 2026")[0]
		b.resolve(t, map[string]string{"INBOX": "INBOX"})
		b.waitFor(t, 5*time.Second, "the unresolved folder is left alone", func() bool {
			return ended(repointed) && b.countLog(notWatched, "alias", "ARCHIVE") == 1
		})
		require.False(t, ended(inbox), "the session of a folder that stays is left as it is")
		require.Len(t, over("INBOX"), 1)
		cancel()
		_, err := wait()
		require.ErrorIs(t, err, context.Canceled)
	})
}

// TestRunRecyclesOnEveryRotatedSecret: a watching connection outlives any
// run, so rotating any secret its login used — the password; a token
// account's OAuth client id, client secret or refresh token; the trust
// anchor or its bundle's password — recycles it at the next renewal.
// (The anchor here is PEM, which needs no password, so rotating the
// password file alone leaves it loadable.)
func TestRunRecyclesOnEveryRotatedSecret(t *testing.T) {
	t.Parallel()
	as := oauthtest.Start(t)
	const a = "MAILFATHOM_ACCOUNTS_0_"
	for name, tc := range map[string]struct {
		rotate string // the variable whose file is rewritten
		env    func(write func(name, value string) string) []string
	}{
		"password":                     {rotate: a + "PASSWORD"},
		"OAuth client id":              {rotate: a + "OAUTH_CLIENT_ID", env: oauthAccount(as)},
		"OAuth client secret":          {rotate: a + "OAUTH_CLIENT_SECRET", env: oauthAccount(as)},
		"OAuth refresh token":          {rotate: a + "OAUTH_REFRESH_TOKEN", env: oauthAccount(as)},
		"trust anchor":                 {rotate: a + "TRUSTED_CERTIFICATE_AUTHORITY", env: trustAnchor},
		"trust anchor bundle password": {rotate: a + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD", env: trustAnchor},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			files := map[string]string{}
			write := func(name, value string) string {
				p := filepath.Join(dir, name)
				require.NoError(t, os.WriteFile(p, []byte(value), 0o600))
				return "file:" + p
			}
			var env []string
			if tc.env != nil {
				env = tc.env(write)
			}
			for _, kv := range env {
				k, v, _ := strings.Cut(kv, "=")
				if p, ok := strings.CutPrefix(v, "file:"); ok {
					files[k] = p
				}
			}
			ctx, b := setupScript(t, &watchScript{notify: notifyOK, idle: idleOK}, env...)
			if tc.rotate == a+"PASSWORD" {
				files[tc.rotate] = b.account.Password.Target
			}
			path, ok := files[tc.rotate]
			require.True(t, ok, tc.rotate)
			ctx, cancel := context.WithCancel(ctx)
			defer cancel()
			wait := b.run(ctx, b.opts)
			const established = "account watches its folders through one push subscription"
			b.waitFor(t, 10*time.Second, "subscribed", func() bool { return b.countLog(established) == 1 })
			rotated := "rotated-" + strings.ReplaceAll(name, " ", "-")
			if tc.rotate == a+"TRUSTED_CERTIFICATE_AUTHORITY" {
				rotated = string(testca.NewCA("rotated test CA").CertPEM)
			}
			require.NoError(t, os.WriteFile(path, []byte(rotated), 0o600))
			b.waitFor(t, 10*time.Second, "recycled", func() bool {
				return b.countLog("push subscription was recycled: a secret it was opened with has changed", "folders", 2) == 1
			})
			cancel()
			_, err := wait()
			require.ErrorIs(t, err, context.Canceled)
			require.NotContains(t, b.logs.String(), rotated)
		})
	}
}

// oauthAccount makes the account a token account of as.
func oauthAccount(as *oauthtest.Server) func(write func(name, value string) string) []string {
	return func(write func(name, value string) string) []string {
		const a = "MAILFATHOM_ACCOUNTS_0_"
		return []string{
			a + "PASSWORD=",
			a + "PERMITTED_AUTHENTICATION_MECHANISMS=OAUTHBEARER",
			a + "OAUTH_TOKEN_ENDPOINT=" + as.TokenURL(),
			a + "OAUTH_CLIENT_ID=" + write("client-id", as.ClientID()),
			a + "OAUTH_CLIENT_SECRET=" + write("client-secret", as.ClientSecret()),
			a + "OAUTH_REFRESH_TOKEN=" + write("refresh-token", as.Grant("someone")),
		}
	}
}

// trustAnchor has the account trust an additional authority, given as PEM
// with a bundle password beside it.
func trustAnchor(write func(name, value string) string) []string {
	const a = "MAILFATHOM_ACCOUNTS_0_"
	return []string{
		a + "CERTIFICATE_TRUST=AdditionalTrustedAuthority",
		a + "TRUSTED_CERTIFICATE_AUTHORITY=" + write("ca.pem", string(testca.NewCA("test CA").CertPEM)),
		a + "TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD=" + write("ca-password", "bundle-password"),
	}
}

// TestRunSubscriptionDigestsSecretsBeforeOpening: a password rotated
// while the subscription's connection was being opened is one the
// subscription may have logged in with, or not; the digest it is compared
// with was taken before the connection opened, so the rotation is noticed
// at the first renewal.
func TestRunSubscriptionDigestsSecretsBeforeOpening(t *testing.T) {
	t.Parallel()
	ctx, b := setupScript(t, &watchScript{notify: notifyOK, idle: idleOK})
	var rotated atomic.Bool
	opts := b.opts
	open := opts.Open
	opts.Open = func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
		s, err := open(ctx, ep)
		if rotated.CompareAndSwap(false, true) {
			require.NoError(t, os.WriteFile(b.account.Password.Target, []byte("rotated-while-opening\n"), 0o600))
		}
		return s, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	wait := b.run(ctx, opts)
	b.waitFor(t, 10*time.Second, "recycled", func() bool {
		return b.countLog("push subscription was recycled: a secret it was opened with has changed") == 1
	})
	cancel()
	_, err := wait()
	require.ErrorIs(t, err, context.Canceled)
}

// TestRunWaitsOutAThrottle: a server that refuses the watch's logins for a
// while because it throttles the account (Microsoft 365's answer, with the
// wait it suggests) is waited out: the throttle is recorded for the whole
// account, the refusals count as no push failure — the watch does not
// degrade to polling however many there are — and the subscription comes
// up once the server lets the watch in.
func TestRunWaitsOutAThrottle(t *testing.T) {
	t.Parallel()
	w := &watchScript{
		notify: func(c *imapscript.Conn, tag, _ string) { c.Send(tag + " OK notifying") },
		idle:   idleOK,
		login: func(conn int) string {
			if conn <= 4 {
				return "NO Request is throttled. Suggested Backoff Time: 300 milliseconds"
			}
			return ""
		},
	}
	ctx, b := setupScript(t, w)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := push.Run(ctx, b.account, b.lim, b.opts)
		done <- err
	}()
	b.waitFor(t, 20*time.Second, "the subscription watches both folders", func() bool {
		return b.countLog("account watches its folders through one push subscription", "folders", 2) == 1
	})
	cancel()
	<-done
	require.Zero(t, b.countLog("push subscription failed too many times in a row, so its folders are synchronized by polling"),
		"logs:\n%s", b.logs.String())
	require.Zero(t, b.countLog("push subscription failed"), "a throttle is no failure of push")
	require.Equal(t, 4, b.countLog("the mail server throttles the account; the watch waits", "reason", "RequestThrottled"))
	th, found, err := mailstore.ActiveThrottle(context.Background(), b.pool, "primary", time.Time{})
	require.NoError(t, err)
	require.True(t, found, "the throttle is recorded for the account")
	require.Equal(t, "RequestThrottled", th.Reason)
}
