package push_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailendpoint"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/push"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/jobs"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// The tests in this file use a scripted server (package imapscript) for
// the two answers Dovecot cannot be made to give: it accepts every NOTIFY
// SET a watch sends, however many folders it names, so it never declines a
// subscription; and it answers IDLE at once whenever it accepted the
// connection, so it never accepts a session and then leaves a wait
// unanswered. The database is a real one.

type testBundle struct {
	pool    *pgxpool.Pool
	logs    *capture.Buffer
	account config.Account
	lim     push.Limits
	opts    push.Options
	script  *watchScript

	mu     sync.Mutex
	queued []jobs.FolderPass
}

// setup starts a scripted server answering NOTIFY SET with notify and IDLE
// with idle, and returns a watch of a push account on it whose folders
// INBOX and ARCHIVE are bound, which degrades after two failures in a row
// for ten seconds and renews its waits every two.
func setup(t *testing.T, notify, idle func(c *imapscript.Conn, tag string)) (context.Context, *testBundle) {
	t.Helper()
	ctx := context.Background()
	w := &watchScript{}
	srv := imapscript.Start(t, w.script(notify, idle))
	pw := filepath.Join(t.TempDir(), "imap-password")
	require.NoError(t, os.WriteFile(pw, []byte("secret\n"), 0o600))
	cfg, err := config.Load([]string{
		"MAILFATHOM_SYNC_ENABLED=true",
		"MAILFATHOM_SYNC_MAX_CONSECUTIVE_PUSH_FAILURES=2",
		"MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD=10s",
		"MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_MAX_ATTEMPTS=1",
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_MODE=Push",
		"MAILFATHOM_ACCOUNTS_0_HOST=" + srv.Host(),
		"MAILFATHOM_ACCOUNTS_0_PORT=" + srv.PortText(),
		"MAILFATHOM_ACCOUNTS_0_USERNAME=someone",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:" + pw,
		"MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY=None",
		"MAILFATHOM_ACCOUNTS_0_ALLOW_INSECURE_CONNECTION=true",
		"MAILFATHOM_ACCOUNTS_0_ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION=true",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS=inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE=Inbox",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS=archive",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH=Archive",
	})
	require.NoError(t, err)
	account, ok := cfg.Account("primary")
	require.True(t, ok)
	b := &testBundle{pool: dbtest.Pool(t), logs: &capture.Buffer{}, account: account, script: w}
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
	b.opts = push.Options{
		Pool: b.pool,
		Env:  mailendpoint.Env{Mode: cfg.SecretInterpretationMode, Resolver: &secret.Resolver{}, Registry: registry},
		Open: func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
			return imapx.OpenWatchSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 3 * time.Second})
		},
		QueuePass: func(_ context.Context, _ pgx.Tx, pass jobs.FolderPass) (bool, error) {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.queued = append(b.queued, pass)
			return false, nil
		},
		Logger: logger,
	}
	// The account run's folder discovery has no script: bind the folders
	// as it would.
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		id, err := mailstore.EnsureAccount(ctx, tx, config.AccountKey(account.ID))
		if err != nil {
			return err
		}
		for alias, path := range map[string]string{"INBOX": "INBOX", "ARCHIVE": "Archive"} {
			if _, _, _, err := mailstore.CommitBinding(ctx, tx, id, alias, path, "/"); err != nil {
				return err
			}
		}
		return nil
	}))
	return ctx, b
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

// watchScript is a server that authenticates anyone and serves EXAMINE;
// notify answers NOTIFY SET and idle IDLE, each given the tag.
type watchScript struct {
	mu      sync.Mutex
	notifys []time.Time
	idles   int
}

func (w *watchScript) script(notify func(c *imapscript.Conn, tag string), idle func(c *imapscript.Conn, tag string)) imapscript.Script {
	return imapscript.WatchServer(func(c *imapscript.Conn, tag string) {
		w.mu.Lock()
		w.notifys = append(w.notifys, time.Now())
		w.mu.Unlock()
		notify(c, tag)
	}, func(c *imapscript.Conn, tag string) {
		w.mu.Lock()
		w.idles++
		w.mu.Unlock()
		idle(c, tag)
	})
}

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
	deadline := time.Now().Add(30 * time.Second)
	for b.countLog(declined, "folders", 2, "subscription_retried_in", 10*time.Second, "level", "INFO") < 2 {
		require.True(t, time.Now().Before(deadline), "the subscription was not asked for again; logs:\n%s", b.logs.String())
		time.Sleep(50 * time.Millisecond)
	}
	cancel()
	require.ErrorIs(t, <-done, context.Canceled)
	b.script.mu.Lock()
	defer b.script.mu.Unlock()
	require.GreaterOrEqual(t, len(b.script.notifys), 2)
	require.GreaterOrEqual(t, b.script.notifys[1].Sub(b.script.notifys[0]), 9*time.Second, "asked again after the period, not before")
	require.Positive(t, b.script.idles, "the folders were watched one session each in the meantime")
	require.Zero(t, b.countLog("push subscription failed"), "a declined subscription is not a failure")
	require.Equal(t, 1, b.countLog(modeLine("Push"), "alias", "INBOX", "mode", "Push"))
	require.Equal(t, 1, b.countLog(modeLine("Push"), "alias", "ARCHIVE", "mode", "Push"))
	b.mu.Lock()
	defer b.mu.Unlock()
	require.Contains(t, b.queued, jobs.FolderPass{AccountID: "primary", Alias: "INBOX"}, "a session that starts watching catches up")
	require.Contains(t, b.queued, jobs.FolderPass{AccountID: "primary", Alias: "ARCHIVE"}, "a session that starts watching catches up")
}
