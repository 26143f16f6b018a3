package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/push"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
	"github.com/mailfathom/mailfathom/workers"
)

// pushBound is how long a delivery into a watched folder may take to be
// stored: far below the 10-minute interval the push tests configure, and
// generous next to the latency push aims for, on two busy cores.
const pushBound = 15 * time.Second

// setupPush is a sync bundle whose account asks for push, with a 10-minute
// interval (so only a report can make a folder synchronize again within a
// test) and the folders INBOX and ARCHIVE, in that order.
func setupPush(t *testing.T, opts ...dovecot.Option) *syncBundle {
	t.Helper()
	b := setupSync(t, opts...)
	b.env["MAILFATHOM_SYNC_INTERVAL"] = "10m"
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "10m"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE"] = "Inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "archive"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "Archive"
	b.env["MAILFATHOM_ACCOUNTS_0_MODE"] = "Push"
	// Dovecot creates a user's automatic folders when a session first
	// opens them; two of its processes doing so at once (a watch and a
	// pass starting together) can meet in its index locks and one
	// panics. The folders are opened once here, before serve starts.
	b.user.UIDNext("INBOX")
	b.user.UIDNext("Archive")
	return b
}

// waitStored waits until alias holds n stored messages and returns how
// long that took.
func (b *syncBundle) waitStored(t *testing.T, alias string, n int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	poll.Until(t, within, fmt.Sprintf("%s holds %d stored messages", alias, n), func() (bool, string) {
		got := len(b.stored(t, alias))
		return got >= n, fmt.Sprintf("%d stored; logs:\n%s", got, b.logs.String())
	})
	return time.Since(start)
}

// logLine is a log line to look for: its message and some of its
// attributes, compared as their JSON encodings.
type logLine struct {
	msg   string
	attrs map[string]any
}

func line(msg string, kv ...any) logLine {
	l := logLine{msg: msg, attrs: map[string]any{}}
	for i := 0; i+1 < len(kv); i += 2 {
		l.attrs[kv[i].(string)] = kv[i+1]
	}
	return l
}

// countLog counts the log lines matching l.
func (b *syncBundle) countLog(l logLine) int {
	n := 0
	for _, raw := range strings.Split(b.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) != nil || m["msg"] != l.msg {
			continue
		}
		ok := true
		for k, v := range l.attrs {
			want, _ := json.Marshal(v)
			got, _ := json.Marshal(m[k])
			if string(want) != string(got) {
				ok = false
				break
			}
		}
		if ok {
			n++
		}
	}
	return n
}

// waitLog waits until the log holds a line matching each of lines.
func (b *syncBundle) waitLog(t *testing.T, within time.Duration, lines ...logLine) {
	t.Helper()
	poll.Until(t, within, "every log line waited for", func() (bool, string) {
		for _, l := range lines {
			if b.countLog(l) == 0 {
				return false, fmt.Sprintf("no log line %q %v; logs:\n%s", l.msg, l.attrs, b.logs.String())
			}
		}
		return true, ""
	})
}

// waitCount waits until n log lines match l.
func (b *syncBundle) waitCount(t *testing.T, l logLine, n int, within time.Duration) {
	t.Helper()
	poll.Until(t, within, fmt.Sprintf("%d lines %q %v", n, l.msg, l.attrs), func() (bool, string) {
		got := b.countLog(l)
		return got >= n, fmt.Sprintf("%d lines; logs:\n%s", got, b.logs.String())
	})
}

// modeLine is the line saying alias of the test account is now
// synchronized in mode.
func modeLine(alias, mode string) logLine {
	return line("folder is now synchronized in "+strings.ToLower(mode)+" mode", "account", "primary", "alias", alias, "mode", mode)
}

// deliver puts one generated message into folder from outside any of
// MailFathom's connections.
func deliver(u *dovecot.User, folder string, i int) imap.UID {
	return u.Append(folder, mailgen.Message(77, i, 2000), time.Time{})
}

// TestPushSubscriptionStoresDeliveriesAtOnce: with NOTIFY and IDLE, one
// subscription watches both folders; mail delivered into either, a flag
// change and an expunge are reflected long before the 10-minute interval.
func TestPushSubscriptionStoresDeliveriesAtOnce(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	reg := prometheus.NewPedanticRegistry()
	pushMetrics, err := push.NewMetrics(reg)
	require.NoError(t, err)
	b.editDeps = func(d *workers.Dependencies) { d.Push = pushMetrics }
	b.start(t)
	b.waitLog(t, pushBound, line("account watches its folders through one push subscription", "account", "primary", "folders", 2),
		modeLine("INBOX", "Push"), modeLine("ARCHIVE", "Push"))
	b.waitIdle(t)
	require.Empty(t, b.stored(t, "INBOX"))

	deliver(b.user, "Archive", 1)
	b.waitStored(t, "ARCHIVE", 1, pushBound)
	uid := deliver(b.user, "INBOX", 2)
	b.waitStored(t, "INBOX", 1, pushBound)

	b.user.SetFlags("INBOX", uid, []imap.Flag{imap.FlagFlagged}, nil)
	b.waitFlags(t, `\Flagged`, pushBound)
	b.user.Expunge("INBOX", uid)
	b.waitFlags(t, `\Flagged [tombstone]`, pushBound)

	require.NotZero(t, b.countLog(line("mail server reported a change in a watched folder", "account", "primary", "alias", "ARCHIVE")))
	require.Equal(t, 1, b.countLog(modeLine("ARCHIVE", "Push")), "the mode is logged when it changes only")
	assertUnseen(t, b.user, "INBOX")

	// The metrics say the same, labelled by account and alias only.
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue() +
				float64(m.GetHistogram().GetSampleCount())
		}
	}
	require.Equal(t, 1.0, got["mailfathom_push_folder_mode{account=primary,alias=INBOX,mode=Push}"], "%v", got)
	require.Equal(t, 0.0, got["mailfathom_push_folder_mode{account=primary,alias=INBOX,mode=Polling}"])
	require.Equal(t, 1.0, got["mailfathom_push_watch_connections{account=primary}"])
	require.GreaterOrEqual(t, got["mailfathom_push_notifications_total{account=primary,alias=ARCHIVE}"], 1.0)
	require.GreaterOrEqual(t, got["mailfathom_push_notifications_total{account=primary,alias=INBOX}"], 2.0, "the delivery, and the flag change and expunge")
	require.GreaterOrEqual(t, got["mailfathom_push_notification_to_stored_seconds{account=primary}"], 2.0, "the passes that stored the deliveries")
}

// waitFlags waits until the account's only INBOX message has state (its
// flags, and " [tombstone]" once the server expunged it).
func (b *syncBundle) waitFlags(t *testing.T, state string, within time.Duration) {
	t.Helper()
	poll.Until(t, within, fmt.Sprintf("INBOX message is %q", state), func() (bool, string) {
		stored := dbassert.Occurrences(t, b.pool, "INBOX")
		if len(stored) != 1 {
			return false, fmt.Sprintf("%d messages stored; logs:\n%s", len(stored), b.logs.String())
		}
		got := stored[0].State()
		return got == state, fmt.Sprintf("%q; logs:\n%s", got, b.logs.String())
	})
}

// TestPushPerFolderSessionsWithIdleOnly: a server offering IDLE without
// NOTIFY gets one session per folder, and deliveries are still stored at
// once.
func TestPushPerFolderSessionsWithIdleOnly(t *testing.T) {
	t.Parallel()
	b := setupPush(t, dovecot.WithoutMailboxListIndex())
	b.start(t)
	b.waitLog(t, pushBound, line("mail server advertises no NOTIFY capability, so each folder is watched over a connection of its own",
		"account", "primary", "subscription_retried_in", 15*time.Minute),
		modeLine("INBOX", "Push"), modeLine("ARCHIVE", "Push"))
	b.waitIdle(t)
	deliver(b.user, "Archive", 1)
	b.waitStored(t, "ARCHIVE", 1, pushBound)
	deliver(b.user, "INBOX", 2)
	b.waitStored(t, "INBOX", 1, pushBound)
	require.NotContains(t, b.logs.String(), "through one push subscription")
}

// TestPushWithoutIdlePolls: a server advertising neither, or NOTIFY
// without IDLE, is polled, and says so once.
func TestPushWithoutIdlePolls(t *testing.T) {
	t.Parallel()
	for name, caps := range map[string]string{
		"neither":             "IMAP4rev1 SPECIAL-USE LIST-EXTENDED AUTH=PLAIN",
		"NOTIFY without IDLE": "IMAP4rev1 SPECIAL-USE LIST-EXTENDED AUTH=PLAIN NOTIFY",
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			b := setupPush(t, dovecot.WithCapability(caps))
			b.start(t)
			b.waitLog(t, pushBound, line("mail server advertises no IDLE capability, so the account's folders are synchronized by polling",
				"account", "primary", "push_retried_in", 15*time.Minute),
				modeLine("INBOX", "Polling"), modeLine("ARCHIVE", "Polling"))
			b.waitIdle(t)
			deliver(b.user, "INBOX", 1)
			// Longer than a watch takes to have a delivery stored; nothing marks the absence of one.
			time.Sleep(3 * time.Second)
			require.Empty(t, b.stored(t, "INBOX"), "nothing watches the folder: it waits for the interval")
		})
	}
}

// TestPushPastMaxSubscribedFolders: folders past the subscription's bound
// poll, in configuration order, and the log says which.
func TestPushPastMaxSubscribedFolders(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	b.env["MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS"] = "1"
	b.start(t)
	b.waitLog(t, pushBound, line("account watches its folders through one push subscription", "account", "primary", "folders", 1),
		line("folder is past the subscription's bound (MAILFATHOM_SYNC_MAX_SUBSCRIBED_FOLDERS), so it is synchronized by polling",
			"account", "primary", "alias", "ARCHIVE", "max_subscribed_folders", 1),
		modeLine("INBOX", "Push"), modeLine("ARCHIVE", "Polling"))
	b.waitIdle(t)
	// The folder past the bound gets its message first: once the watched
	// folder's later one is stored, a report of the first would have been
	// acted on too.
	deliver(b.user, "Archive", 2)
	deliver(b.user, "INBOX", 1)
	b.waitStored(t, "INBOX", 1, pushBound)
	require.Empty(t, b.stored(t, "ARCHIVE"), "the folder past the bound waits for the interval")

	// The status view says which folder is watched.
	rep, err := status.Read(context.Background(), b.pool, workers.StatusOptions(b.deps(t)))
	require.NoError(t, err)
	require.Len(t, rep.Accounts, 1)
	require.Equal(t, "Push", rep.Accounts[0].ConfiguredMode)
	modes := map[string]string{}
	for _, f := range rep.Accounts[0].Folders {
		modes[f.Alias] = f.EffectiveMode
	}
	require.Equal(t, map[string]string{"INBOX": "Push", "ARCHIVE": "Polling"}, modes)
}

// pushDegradation is the degradation period of fastFailures: half the
// ten seconds configuration accepts, so that a test waiting one out
// spends less, and still long enough that a watch asking again too early
// shows.
const pushDegradation = 5 * time.Second

// fastFailures makes push failures quick to provoke: two in a row degrade
// the account for pushDegradation, one IDLE lasts two seconds, a command
// that gets no answer fails after three, and establishment is not retried
// inside its pipeline.
func (b *syncBundle) fastFailures() {
	b.env["MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_MAX_ATTEMPTS"] = "1"
	b.env["MAILFATHOM_SYNC_MAX_CONSECUTIVE_PUSH_FAILURES"] = "2"
	b.editConfig = func(cfg *config.Config) {
		// Both below what configuration accepts (one minute, ten
		// seconds), so that a test sees several renewals and waits out a
		// degradation quickly.
		cfg.Sync.PushRenewalInterval = 2 * time.Second
		cfg.Sync.PushDegradationPeriod = pushDegradation
	}
	b.editDeps = func(d *workers.Dependencies) {
		d.OpenWatch = func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
			return imapx.OpenWatchSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 3 * time.Second})
		}
	}
}

// TestPushDegradesAndRecovers: a server that stops answering fails the
// wait at its renewal, and then the connections opened to it; at the
// bound the account degrades to polling, logged at warning with how long,
// and push comes back once the degradation period has passed.
func TestPushDegradesAndRecovers(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	b.fastFailures()
	proxy := faultproxy.Start(t, b.server.TLSAddr())
	host, port := splitHostPort(t, proxy.Addr())
	b.env["MAILFATHOM_ACCOUNTS_0_HOST"] = host
	b.env["MAILFATHOM_ACCOUNTS_0_PORT"] = port
	b.start(t)
	b.waitLog(t, pushBound, line("account watches its folders through one push subscription", "account", "primary"))
	b.waitIdle(t)

	proxy.StallAll()
	degraded := line("push subscription failed too many times in a row, so its folders are synchronized by polling",
		"account", "primary", "consecutive_failures", 2, "polling_for", pushDegradation)
	b.waitLog(t, 30*time.Second, line("push subscription failed", "account", "primary", "consecutive_failures", 1),
		degraded, modeLine("INBOX", "Polling"), modeLine("ARCHIVE", "Polling"))
	at := time.Now()
	require.Equal(t, "WARN", b.logLevel(t, degraded))
	proxy.Heal()

	b.waitLog(t, 30*time.Second, line("account watches its folders through one push subscription", "account", "primary"),
		modeLine("INBOX", "Push"))
	b.waitCount(t, modeLine("INBOX", "Push"), 2, 30*time.Second)
	require.GreaterOrEqual(t, time.Since(at), pushDegradation-time.Second, "push stayed off for the degradation period")
	deliver(b.user, "INBOX", 1)
	b.waitStored(t, "INBOX", 1, pushBound)
}

// TestPushSurvivesServerRestarts: a restart under the watch ends its wait
// with a failure and the watch reconnects; a wait that returns clears the
// count, so the first failure after each restart is the first in a row
// again. (The bound is five here, so that reconnects that reach Dovecot
// while it is still starting — for up to 1+2+3+4 s of retry delays and
// their jitter, which a loaded machine needs — do not degrade the
// account. A count that a returned wait did not clear still shows: the
// second restart's first failure would not be logged as the first in a
// row.)
func TestPushSurvivesServerRestarts(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	b.fastFailures()
	b.env["MAILFATHOM_SYNC_MAX_CONSECUTIVE_PUSH_FAILURES"] = "5"
	// The watch connects in the clear, so its IDLE commands can be read.
	var watch wiretap.Recorder
	fast := b.editDeps
	b.editDeps = func(d *workers.Dependencies) {
		fast(d)
		d.OpenWatch = func(ctx context.Context, ep imapx.Endpoint) (*imapx.WatchSession, error) {
			ep.Security, ep.Port = imapx.None, b.server.Port()
			ep.AllowInsecureConnection, ep.AllowClearTextOverUnencrypted = true, true
			ep.Dial = watch.Dial("")
			return imapx.OpenWatchSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 3 * time.Second})
		}
	}
	b.start(t)
	established := line("account watches its folders through one push subscription", "account", "primary")
	b.waitLog(t, pushBound, established)
	b.waitIdle(t)
	const restarts = 2
	for i := 1; i <= restarts; i++ {
		b.server.Restart()
		b.waitCount(t, established, i+1, 30*time.Second)
		// Two renewals: waits that returned. The watch asks for its next
		// IDLE only once the one before has returned, so the third IDLE
		// of the connection established is the sign.
		poll.Until(t, 30*time.Second, "two waits of the restored subscription returned", func() (bool, string) {
			conns := watch.Conns()
			idles := 0
			for _, l := range conns[len(conns)-1] {
				if f := strings.Fields(l); len(f) == 2 && strings.EqualFold(f[1], "IDLE") {
					idles++
				}
			}
			return idles >= 3, fmt.Sprintf("%d IDLE commands on the newest of %d connections", idles, len(conns))
		})
		deliver(b.user, "INBOX", i)
		b.waitStored(t, "INBOX", i, pushBound)
	}
	require.Equal(t, restarts, b.countLog(line("push subscription failed", "account", "primary", "consecutive_failures", 1)),
		"each restart's first failure counts from one again; logs:\n%s", b.logs.String())
	require.Zero(t, b.countLog(line("push subscription failed too many times in a row, so its folders are synchronized by polling")),
		"logs:\n%s", b.logs.String())
	require.Equal(t, 1, b.countLog(modeLine("INBOX", "Push")), "a reconnect is not a change of mode")
}

// logTime returns the time of the first log line matching l's message.
func (b *syncBundle) logTime(t *testing.T, l logLine) time.Time {
	t.Helper()
	for _, raw := range strings.Split(b.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) == nil && m["msg"] == l.msg {
			at, err := time.Parse(time.RFC3339Nano, m["time"].(string))
			require.NoError(t, err)
			return at
		}
	}
	t.Fatalf("no line %q", l.msg)
	return time.Time{}
}

// logLevel returns the level of the first log line matching l.
func (b *syncBundle) logLevel(t *testing.T, l logLine) string {
	t.Helper()
	for _, raw := range strings.Split(b.logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(raw), &m) == nil && m["msg"] == l.msg {
			return m["level"].(string)
		}
	}
	t.Fatalf("no line %q", l.msg)
	return ""
}

// TestPushRecyclesOnRotatedPassword: a watching connection outlives any
// run, so a rotated password file is what ends it. At the next renewal the
// watch re-reads the account's secrets, finds the password changed,
// closes its subscription and opens another with the new one; the old
// password is never offered to the server again, which would show in
// Dovecot's log as a failed login.
func TestPushRecyclesOnRotatedPassword(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	b.fastFailures()
	b.start(t)
	established := line("account watches its folders through one push subscription", "account", "primary")
	b.waitLog(t, pushBound, established)
	b.waitIdle(t)
	old := b.user.Password()

	rotated := "rotated-Push-Secret-41d9"
	b.user.SetPassword(rotated)
	path := b.env["MAILFATHOM_ACCOUNTS_0_PASSWORD"][len("file:"):]
	require.NoError(t, os.WriteFile(path, []byte(rotated+"\n"), 0o600))
	b.waitLog(t, pushBound, line("push subscription was recycled: a secret it was opened with has changed", "account", "primary", "folders", 2))
	b.waitCount(t, established, 2, pushBound)
	deliver(b.user, "Archive", 1)
	b.waitStored(t, "ARCHIVE", 1, pushBound)

	// A pass or run that read the file just before it was rewritten may
	// fail its login while the server already expects the new password;
	// from the recycle on, nothing may offer the old one. Dovecot stamps
	// its log to the second, in UTC.
	recycled := b.logTime(t, line("push subscription was recycled: a secret it was opened with has changed", "account", "primary"))
	dovecotLog := b.server.Log()
	require.Contains(t, dovecotLog, "user=<"+b.user.Name()+">")
	for _, l := range strings.Split(dovecotLog, "\n") {
		if strings.Contains(l, "auth failed") && len(l) >= 19 && l[:19] >= recycled.UTC().Format(time.DateTime) {
			t.Fatalf("the old password was offered again after the recycle: %s", l)
		}
	}
	require.Zero(t, b.countLog(line("push subscription failed", "account", "primary")))
	logs := b.logs.String()
	require.NotContains(t, logs, old)
	require.NotContains(t, logs, rotated)
}

// TestPushWatchRearmsOnTheSameRow: at its lifetime a watch snoozes and
// comes back as the same row rather than inserting another, and keeps
// storing deliveries across the re-arm. A re-armed subscription finds the
// folders as their last passes left them — the open one by EXAMINE, the
// other by the STATUS Dovecot sends for NOTIFY SET STATUS — and queues no
// pass.
func TestPushWatchRearmsOnTheSameRow(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	b.fastFailures()
	edit := b.editDeps
	b.editDeps = func(d *workers.Dependencies) {
		edit(d)
		workers.WithWatchLifetime(d, 3*time.Second)
	}
	b.start(t)
	established := line("account watches its folders through one push subscription", "account", "primary")
	b.waitLog(t, pushBound, established)
	b.waitIdle(t)
	passes := line("folder pass finished", "account", "primary")
	synchronized := b.countLog(passes)
	rearmed := b.countLog(established) + 2
	b.waitCount(t, established, rearmed, time.Minute)
	b.waitIdle(t)
	require.Equal(t, synchronized, b.countLog(passes), "a re-arm queues no pass for folders that did not change; logs:\n%s", b.logs.String())
	require.Equal(t, 1, dbassert.JobCount(t, b.pool, "watch"), "one row per account, re-armed in place")
	deliver(b.user, "INBOX", 1)
	b.waitStored(t, "INBOX", 1, pushBound)
	require.Equal(t, 1, b.countLog(modeLine("INBOX", "Push")), "a re-arm is not a change of mode")
}

// TestPushNoChangeLostUnderBursts: deliveries arrive while the passes
// they start are running, which is when a report can only leave a mark
// for the running pass. Every message is stored long before the interval,
// so no mark was lost.
func TestPushNoChangeLostUnderBursts(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	// Each pass takes a moment to open its session, as over a long link,
	// so deliveries of the burst land while passes run: the race this
	// test is about, which it must hit to say anything. Dovecot gathers
	// the changes of about half a second before it tells an idling
	// client, so the opening takes longer than that: a report made after
	// a pass started then reaches it before it completes.
	b.editDeps = func(d *workers.Dependencies) {
		d.OpenSession = func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
			select {
			case <-time.After(time.Second):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
		}
	}
	b.start(t)
	b.waitLog(t, pushBound, line("account watches its folders through one push subscription", "account", "primary"))
	b.waitIdle(t)
	rng := rand.New(rand.NewPCG(5, 5))
	const n = 20
	for i := range n {
		deliver(b.user, "INBOX", i)
		time.Sleep(time.Duration(rng.IntN(150)) * time.Millisecond)
	}
	b.waitStored(t, "INBOX", n, pushBound)
	again := b.countLog(line("a change was reported while the pass ran; the folder is read once more"))
	t.Logf("passes that went around once more for a report made while they ran: %d", again)
	require.Positive(t, again, "a report arrived while a pass ran")
}

// TestPushReportDuringAPassRunsItOnceMore: a report that arrives while the
// folder's pass is running cannot queue a second pass (passes are unique
// while running); it leaves a mark, and the running pass goes around once
// more before it completes. The report is provoked while the pass opens
// its mailbox session, after the pass took the marks left before it.
func TestPushReportDuringAPassRunsItOnceMore(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	// INBOX alone, so that the first session opened after arming is its
	// pass's.
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS")
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH")
	// The armed opening hands itself to the test (opening) and goes on
	// once the test lets it (proceed).
	var armed atomic.Bool
	opening, proceed := make(chan struct{}), make(chan struct{})
	var release sync.Once
	t.Cleanup(func() { release.Do(func() { close(proceed) }) })
	b.editDeps = func(d *workers.Dependencies) {
		d.OpenSession = func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
			if armed.CompareAndSwap(true, false) {
				close(opening)
				select {
				case <-proceed:
				case <-ctx.Done():
					return nil, ctx.Err()
				}
			}
			return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
		}
	}
	b.start(t)
	b.waitLog(t, pushBound, line("account watches its folders through one push subscription", "account", "primary"))
	b.waitIdle(t)
	armed.Store(true)
	deliver(b.user, "INBOX", 1)
	select {
	case <-opening:
	case <-time.After(pushBound):
		t.Fatalf("no pass opened its session within %v of the delivery; logs:\n%s", pushBound, b.logs.String())
	}
	deliver(b.user, "INBOX", 2)
	poll.Until(t, pushBound, "the report left a mark for the running pass", func() (bool, string) {
		marked, err := mailstore.ChangeReported(context.Background(), b.pool, "primary", "INBOX")
		require.NoError(t, err)
		return marked, "no change of INBOX reported"
	})
	release.Do(func() { close(proceed) })
	b.waitStored(t, "INBOX", 2, pushBound)
	b.waitLog(t, pushBound, line("a change was reported while the pass ran; the folder is read once more", "account", "primary", "alias", "INBOX"))
	require.False(t, armed.Load())
}

// TestPushReconnectsAfterACut: the fault proxy cuts the watching
// connection; the wait fails, counting one failure, the watch connects
// again at once and deliveries are stored as before.
func TestPushReconnectsAfterACut(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	b.fastFailures()
	proxy := faultproxy.Start(t, b.server.TLSAddr())
	host, port := splitHostPort(t, proxy.Addr())
	b.env["MAILFATHOM_ACCOUNTS_0_HOST"] = host
	b.env["MAILFATHOM_ACCOUNTS_0_PORT"] = port
	b.start(t)
	established := line("account watches its folders through one push subscription", "account", "primary")
	b.waitLog(t, pushBound, established)
	b.waitIdle(t)

	proxy.CutAll()
	b.waitLog(t, pushBound, line("push subscription failed", "account", "primary", "consecutive_failures", 1))
	b.waitCount(t, established, 2, pushBound)
	deliver(b.user, "INBOX", 1)
	b.waitStored(t, "INBOX", 1, pushBound)
	require.Zero(t, b.countLog(line("push subscription failed", "account", "primary", "consecutive_failures", 2)))
	require.Positive(t, proxy.Stats().Cut)
}

// logins counts the logins of the test user Dovecot logged.
func (b *syncBundle) logins() int {
	return strings.Count(b.server.Log(), "Login: user=<"+b.user.Name()+">")
}

// TestPushIdleOnlyAddsNoSchedule: on a server offering IDLE without
// NOTIFY, push adds no schedule of its own. Once the first synchronization
// is done, a quiet account costs no folder pass and no reconciliation
// window, and no login beyond the one capability read per degradation
// period: the sessions that watch are not torn down to ask again, nor do
// they queue a pass when nothing changed. A delivery afterwards is still
// stored at once.
func TestPushIdleOnlyAddsNoSchedule(t *testing.T) {
	t.Parallel()
	b := setupPush(t, dovecot.WithoutMailboxListIndex())
	b.env["MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD"] = "10s"
	deliver(b.user, "INBOX", 1)
	deliver(b.user, "Archive", 2)
	b.start(t)
	b.waitLog(t, pushBound, modeLine("INBOX", "Push"), modeLine("ARCHIVE", "Push"))
	b.waitIdle(t)
	b.waitStored(t, "INBOX", 1, pushBound)
	b.waitStored(t, "ARCHIVE", 1, pushBound)

	passes := func(alias string) int {
		return b.countLog(line("folder pass finished", "account", "primary", "alias", alias))
	}
	windows := func(alias string) int {
		return b.countLog(line("reconciliation window applied", "account", "primary", "alias", alias))
	}
	const quiet = 35 * time.Second
	before := map[string][2]int{"INBOX": {passes("INBOX"), windows("INBOX")}, "ARCHIVE": {passes("ARCHIVE"), windows("ARCHIVE")}}
	logins := b.logins()
	// The measurement is what happens while nothing does: a fixed wait.
	time.Sleep(quiet)
	t.Logf("in %v of quiet: %d logins; INBOX %d passes, %d windows; ARCHIVE %d passes, %d windows", quiet, b.logins()-logins,
		passes("INBOX")-before["INBOX"][0], windows("INBOX")-before["INBOX"][1], passes("ARCHIVE")-before["ARCHIVE"][0], windows("ARCHIVE")-before["ARCHIVE"][1])
	for alias, was := range before {
		require.LessOrEqual(t, passes(alias)-was[0], 1, "%s: folder passes in %v of quiet; logs:\n%s", alias, quiet, b.logs.String())
		require.LessOrEqual(t, windows(alias)-was[1], 1, "%s: reconciliation windows in %v of quiet", alias, quiet)
	}
	rereads := int(quiet/(10*time.Second)) + 1
	require.LessOrEqual(t, b.logins()-logins, rereads, "logins in %v of quiet: one capability read per degradation period; logs:\n%s", quiet, b.logs.String())
	require.GreaterOrEqual(t, b.countLog(line("mail server advertises no NOTIFY capability, so each folder is watched over a connection of its own",
		"account", "primary", "subscription_retried_in", 10*time.Second)), 3, "the capability is read again each period")

	deliver(b.user, "Archive", 3)
	b.waitStored(t, "ARCHIVE", 2, pushBound)
	require.Equal(t, 1, b.countLog(modeLine("ARCHIVE", "Push")), "watched throughout")
}

// TestPushWatchesOnlyResolvedFolders: two folders configured and the first
// deleted on the server. After a restart — before the account's next run,
// which a restart puts off by RestartGrace — the subscription leaves out
// the folder the server will not open and watches the other, still in
// Push; the run then resolves only the other, and the status view says
// why the first is not watched.
func TestPushWatchesOnlyResolvedFolders(t *testing.T) {
	t.Parallel()
	b := setupPush(t)
	b.user.CreateFolder("Lists")
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "lists"
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE")
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Lists"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "inbox"
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH")
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_SPECIAL_USE"] = "Inbox"
	b.start(t)
	established := line("account watches its folders through one push subscription", "account", "primary")
	b.waitLog(t, pushBound, line(established.msg, "account", "primary", "folders", 2), modeLine("LISTS", "Push"), modeLine("INBOX", "Push"))
	b.waitIdle(t)
	b.stop()

	b.user.DeleteFolder("Lists")
	b.start(t)
	b.waitLog(t, pushBound, line(established.msg, "account", "primary", "folders", 1),
		line("mail server would not open the folder, so it is synchronized by polling", "account", "primary", "alias", "LISTS"))
	modes := func() map[string][2]string {
		rep, err := status.Read(context.Background(), b.pool, workers.StatusOptions(b.deps(t)))
		require.NoError(t, err)
		require.Len(t, rep.Accounts, 1)
		got := map[string][2]string{}
		for _, f := range rep.Accounts[0].Folders {
			got[f.Alias] = [2]string{f.EffectiveMode, f.Unresolved}
		}
		return got
	}
	require.Equal(t, map[string][2]string{"LISTS": {"Polling", ""}, "INBOX": {"Push", ""}}, modes())
	deliver(b.user, "INBOX", 1)
	b.waitStored(t, "INBOX", 1, pushBound)

	// The account's next run resolves the inbox alone.
	b.runAgain(t)
	b.waitLog(t, pushBound, line("folder is not watched: the account's latest run resolved its alias to no folder",
		"account", "primary", "alias", "LISTS", "failure", "FolderAliasUnresolved"))
	require.Equal(t, map[string][2]string{"LISTS": {"Polling", "FolderAliasUnresolved"}, "INBOX": {"Push", ""}}, modes())
	deliver(b.user, "INBOX", 2)
	b.waitStored(t, "INBOX", 2, pushBound)
	require.Zero(t, b.countLog(line("push subscription failed", "account", "primary")), "a folder the server will not open is not the subscription's failure")
}
