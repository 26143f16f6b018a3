package workers_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
)

// The tests in this file use a scripted server (package imapscript) for
// the two answers Dovecot cannot be made to give: it accepts every NOTIFY
// SET a watch sends, however many folders it names, so it never declines a
// subscription; and it answers IDLE at once whenever it accepted the
// connection, so it never accepts a session and then leaves a wait
// unanswered.

// scriptedPush points the push bundle's account at srv over a plain
// connection and binds its two folders, since the account run's folder
// discovery has no script.
func scriptedPush(t *testing.T, srv *imapscript.Server) *syncBundle {
	t.Helper()
	b := setupPush(t)
	b.fastFailures()
	b.env["MAILFATHOM_ACCOUNTS_0_HOST"] = srv.Host()
	b.env["MAILFATHOM_ACCOUNTS_0_PORT"] = srv.PortText()
	b.env["MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY"] = "None"
	b.env["MAILFATHOM_ACCOUNTS_0_ALLOW_INSECURE_CONNECTION"] = "true"
	b.env["MAILFATHOM_ACCOUNTS_0_ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION"] = "true"
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST")
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY")
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		id, err := mailstore.EnsureAccount(ctx, tx, "primary")
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
	return b
}

// watchScript is a server that authenticates anyone and serves EXAMINE;
// notify answers NOTIFY SET and idle IDLE, each given the tag.
type watchScript struct {
	mu      sync.Mutex
	notifys []time.Time
	idles   int
}

func (w *watchScript) script(notify func(c *imapscript.Conn, tag string), idle func(c *imapscript.Conn, tag string)) imapscript.Script {
	return func(c *imapscript.Conn) {
		c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN IDLE NOTIFY")
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		c.Send(tag + " OK [CAPABILITY IMAP4rev1 IDLE NOTIFY] logged in")
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
				c.Send("* 0 EXISTS", "* OK [UIDVALIDITY 7] ok", f[0]+" OK [READ-ONLY] done")
			case "NOTIFY":
				w.mu.Lock()
				w.notifys = append(w.notifys, time.Now())
				w.mu.Unlock()
				notify(c, f[0])
			case "IDLE":
				w.mu.Lock()
				w.idles++
				w.mu.Unlock()
				idle(c, f[0])
			case "LOGOUT":
				c.Send("* BYE bye", f[0]+" OK done")
				return
			default:
				c.Send(f[0] + " BAD not scripted")
			}
		}
	}
}

// idleOK serves IDLE as a quiet server does: a continuation, and the
// completion once the client says DONE.
func idleOK(c *imapscript.Conn, tag string) {
	c.Send("+ idling")
	if line, ok := c.ReadLine(); ok && strings.EqualFold(line, "DONE") {
		c.Send(tag + " OK idle done")
	}
}

// TestPushCountNotResetByConnect: a server that accepts every connection
// and subscription and then never answers IDLE fails each wait; the
// successful connects in between do not clear the count, so the bound is
// reached and the account degrades.
func TestPushCountNotResetByConnect(t *testing.T) {
	t.Parallel()
	w := &watchScript{}
	srv := imapscript.Start(t, w.script(func(c *imapscript.Conn, tag string) { c.Send(tag + " OK notifying") },
		func(c *imapscript.Conn, tag string) {
			for { // never answers
				if _, ok := c.ReadLine(); !ok {
					return
				}
			}
		}))
	b := scriptedPush(t, srv)
	b.start(t)
	b.waitLog(t, 30*time.Second,
		line("push subscription failed", "account", "primary", "consecutive_failures", 1),
		line("push subscription failed", "account", "primary", "consecutive_failures", 2),
		line("push subscription failed too many times in a row, so its folders are synchronized by polling",
			"account", "primary", "consecutive_failures", 2, "polling_for", pushDegradation),
		modeLine("INBOX", "Polling"), modeLine("ARCHIVE", "Polling"))
	w.mu.Lock()
	defer w.mu.Unlock()
	require.Len(t, w.notifys, 2, "both failed waits followed a subscription the server accepted")
	require.Equal(t, 2, b.countLog(line("account watches its folders through one push subscription", "account", "primary", "folders", 2)))
}

// TestPushDeclinedSubscriptionWatchesEachFolder: a server that declines
// the subscription gets one session per folder in the meantime, logged at
// information level as a working mode, and is asked for a subscription
// again once the degradation period has passed.
func TestPushDeclinedSubscriptionWatchesEachFolder(t *testing.T) {
	t.Parallel()
	w := &watchScript{}
	srv := imapscript.Start(t, w.script(func(c *imapscript.Conn, tag string) {
		c.Send(tag + " NO [NOTIFICATIONOVERFLOW] too many mailboxes")
	}, idleOK))
	b := scriptedPush(t, srv)
	b.start(t)
	declined := line("mail server declined the push subscription, so each folder is watched over a connection of its own",
		"account", "primary", "folders", 2, "subscription_retried_in", pushDegradation)
	b.waitLog(t, pushBound, declined, modeLine("INBOX", "Push"), modeLine("ARCHIVE", "Push"))
	require.Equal(t, "INFO", b.logLevel(t, declined))
	deadline := time.Now().Add(30 * time.Second)
	for b.countLog(declined) < 2 {
		require.True(t, time.Now().Before(deadline), "the subscription was not asked for again; logs:\n%s", b.logs.String())
		time.Sleep(50 * time.Millisecond)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	require.GreaterOrEqual(t, len(w.notifys), 2)
	require.GreaterOrEqual(t, w.notifys[1].Sub(w.notifys[0]), pushDegradation-time.Second, "asked again after the period, not before")
	require.Positive(t, w.idles, "the folders were watched one session each in the meantime")
	require.Zero(t, b.countLog(line("push subscription failed", "account", "primary")), "a declined subscription is not a failure")
	require.Equal(t, 1, b.countLog(modeLine("INBOX", "Push")))
}
