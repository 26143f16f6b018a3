package imapx_test

import (
	"context"
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// watchBundle is a bundle with a watching session whose wire is recorded.
type watchBundle struct {
	*testBundle
	wire *recorder
	sess *imapx.WatchSession
}

func setupWatch(t *testing.T, srv *dovecot.Server) *watchBundle {
	t.Helper()
	b := setup(t, srv)
	rec := &recorder{}
	ep := b.endpoint(imapx.None)
	ep.Dial = rec.Dial("")
	s, err := imapx.OpenWatchSession(b.ctx, ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return &watchBundle{testBundle: b, wire: rec, sess: s}
}

// waitWhile runs Wait while change makes a change from outside the
// session, and returns what Wait reported.
func (b *watchBundle) waitWhile(renewal time.Duration, change func()) ([]string, error) {
	type result struct {
		changed []string
		err     error
	}
	done := make(chan result, 1)
	before := b.wire.Continuations()
	go func() {
		changed, err := b.sess.Wait(b.ctx, renewal)
		done <- result{changed, err}
	}()
	// IDLE is under way once its continuation came; a change made before
	// it would be reported all the same, but this tests the wait.
	poll.UntilTrue(b.t, 10*time.Second, "the server answered IDLE with its continuation", func() bool {
		return b.wire.Continuations() > before
	})
	change()
	r := <-done
	return r.changed, r.err
}

// watchCommand matches the only commands a watching session sends after
// authenticating.
var watchCommand = regexp.MustCompile(`^(R\d+ (EXAMINE "[^"]*"( \(CONDSTORE\))?|NOTIFY SET .*|IDLE|LOGOUT)|DONE)$`)

// requireWatchOnly fails unless everything the session sent after
// authentication is EXAMINE, NOTIFY, IDLE, DONE or LOGOUT: no fetch of a
// body, an envelope or flags, no SELECT, no STORE.
func requireWatchOnly(t *testing.T, rec *recorder) []string {
	t.Helper()
	requireReadOnlyWire(t, rec)
	var sent []string
	for _, line := range rec.Lines() {
		if strings.Contains(line, "AUTHENTICATE") || strings.HasPrefix(line, "T") {
			continue // the authentication every connection runs
		}
		require.Regexp(t, watchCommand, line)
		require.NotRegexp(t, `(?i)FETCH|ENVELOPE|BODY|\bFLAGS\b|\bSELECT\b|\bSTORE\b`, line)
		sent = append(sent, strings.Fields(line)[min(1, len(strings.Fields(line))-1)])
	}
	return sent
}

// TestWatchSubscriptionReportsWhichFolderChanged: one connection subscribed
// to three folders hears a delivery, a flag change and an expunge made by
// another client, in the open folder and in the others, and reports only
// which folder changed; it sends nothing but EXAMINE, NOTIFY, IDLE and
// DONE.
func TestWatchSubscriptionReportsWhichFolderChanged(t *testing.T) {
	t.Parallel()
	b := setupWatch(t, nil)
	require.True(t, b.sess.CanSubscribe())
	sent := b.user.Append("Sent", message(1, 200), time.Time{})
	inbox := b.user.Append("INBOX", message(2, 200), time.Time{})
	_, err := b.sess.Subscribe(b.ctx, []string{"INBOX", "Sent", "Archive"})
	require.NoError(t, err)

	for _, step := range []struct {
		name   string
		change func()
		want   string
	}{
		{"delivery to another folder", func() { b.user.Append("Archive", message(3, 200), time.Time{}) }, "Archive"},
		{"flag change in another folder", func() { b.user.SetFlags("Sent", sent, []imap.Flag{imap.FlagFlagged}, nil) }, "Sent"},
		{"expunge in another folder", func() { b.user.Expunge("Sent", sent) }, "Sent"},
		{"delivery to the open folder", func() { b.user.Append("INBOX", message(4, 200), time.Time{}) }, "INBOX"},
		{"flag change in the open folder", func() { b.user.SetFlags("INBOX", inbox, []imap.Flag{imap.FlagSeen}, nil) }, "INBOX"},
		{"expunge in the open folder", func() { b.user.Expunge("INBOX", inbox) }, "INBOX"},
		{"a folder not watched", func() { b.user.Append("Junk", message(5, 200), time.Time{}) }, ""},
	} {
		start := time.Now()
		changed, err := b.waitWhile(3*time.Second, step.change)
		require.NoError(t, err, step.name)
		if step.want == "" {
			require.Empty(t, changed, step.name)
			require.GreaterOrEqual(t, time.Since(start), 3*time.Second, "the renewal ended the wait")
			continue
		}
		require.Equal(t, []string{step.want}, changed, step.name)
		require.Less(t, time.Since(start), 3*time.Second, "%s: the report ended the wait", step.name)
	}
	require.True(t, b.sess.Usable(), "renewal reconnects nothing")
	require.NoError(t, b.sess.Close())
	cmds := requireWatchOnly(t, b.wire)
	require.Equal(t, []string{"EXAMINE", "NOTIFY"}, cmds[:2])
	require.Equal(t, "LOGOUT", cmds[len(cmds)-1])
	require.Contains(t, b.wire.String(), `NOTIFY SET STATUS (selected (MessageNew MessageExpunge FlagChange)) (mailboxes ("Sent" "Archive") (MessageNew MessageExpunge FlagChange))`)
}

// TestWatchOneFolderWithIdle: a session watching one folder reports its
// changes, and a quiet renewal keeps the connection.
func TestWatchOneFolderWithIdle(t *testing.T) {
	t.Parallel()
	b := setupWatch(t, nil)
	_, err := b.sess.WatchFolder(b.ctx, dovecot.NestedFolder)
	require.NoError(t, err)
	changed, err := b.sess.Wait(b.ctx, time.Second)
	require.NoError(t, err)
	require.Empty(t, changed)
	changed, err = b.waitWhile(10*time.Second, func() { b.user.Append(dovecot.NestedFolder, message(1, 100), time.Time{}) })
	require.NoError(t, err)
	require.Equal(t, []string{dovecot.NestedFolder}, changed)
	changed, err = b.waitWhile(time.Second, func() { b.user.Append("INBOX", message(2, 100), time.Time{}) })
	require.NoError(t, err)
	require.Empty(t, changed, "another folder is not reported without a subscription")
	require.NoError(t, b.sess.Close())
	require.Equal(t, []string{"EXAMINE", "IDLE", "DONE", "IDLE", "DONE", "IDLE", "DONE", "LOGOUT"}, requireWatchOnly(t, b.wire))
}

// TestWatchCapabilitiesFromTheConnection: what the session reports it can
// do is what this server advertised on this connection.
func TestWatchCapabilitiesFromTheConnection(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		opt            dovecot.Option
		subscribe, idl bool
	}{
		{dovecot.WithCapability("IMAP4rev1 IDLE NOTIFY"), true, true},
		{dovecot.WithoutMailboxListIndex(), false, true},
		{dovecot.WithCapability("IMAP4rev1 NOTIFY"), false, false},
		{dovecot.WithCapability("IMAP4rev1"), false, false},
	} {
		b := setupWatch(t, dovecot.Start(t, tc.opt))
		require.Equal(t, tc.subscribe, b.sess.CanSubscribe())
		require.Equal(t, tc.idl, b.sess.CanIdle())
	}
}

// TestWatchWaitFailures: a server that goes away ends the wait as a
// transient failure, and the caller's context ends it with its own error.
func TestWatchWaitFailures(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t)
	b := setupWatch(t, srv)
	_, err := b.sess.WatchFolder(b.ctx, "INBOX")
	require.NoError(t, err)
	_, err = b.waitWhile(time.Minute, srv.Stop)
	require.Error(t, err)
	require.True(t, imapx.IsTransient(err), "%v", err)
	require.False(t, b.sess.Usable())
	_, err = b.sess.Wait(b.ctx, time.Second)
	require.True(t, imapx.IsTransient(err))

	srv.Restart()
	b2 := setupWatch(t, srv)
	_, err = b2.sess.WatchFolder(b2.ctx, "INBOX")
	require.NoError(t, err)
	ctx, cancel := context.WithTimeout(b2.ctx, 500*time.Millisecond)
	defer cancel()
	_, err = b2.sess.Wait(ctx, time.Minute)
	require.ErrorIs(t, err, context.DeadlineExceeded)
}

// TestWatchSubscriptionDeclined uses a scripted server: Dovecot accepts
// every NOTIFY SET these sessions send (it watches any number of folders,
// existing or not), so no real server here can be made to decline one.
// The declined subscription is ErrSubscriptionDeclined and leaves the
// connection usable.
func TestWatchSubscriptionDeclined(t *testing.T) {
	t.Parallel()
	srv := imapscript.Start(t, imapscript.WatchServer(func(c *imapscript.Conn, tag string) {
		c.Send(tag + " NO [NOTIFICATIONOVERFLOW] too many mailboxes")
	}, func(c *imapscript.Conn, tag string) {
		c.Send(tag + " BAD not scripted")
	}))
	b := setup(t, nil)
	ep := b.endpoint(imapx.None)
	ep.Host, ep.Port = srv.Host(), srv.Port()
	s, err := imapx.OpenWatchSession(b.ctx, ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
	require.NoError(t, err)
	require.True(t, s.CanSubscribe())
	_, err = s.Subscribe(b.ctx, []string{"INBOX", "Sent"})
	require.ErrorIs(t, err, imapx.ErrSubscriptionDeclined)
	var cmd *imapx.CommandError
	require.True(t, errors.As(err, &cmd))
	require.Equal(t, "NOTIFICATIONOVERFLOW", cmd.Code)
	require.True(t, s.Usable())
	require.NoError(t, s.Close())
}

// TestWatchServerEndsNotifications uses a scripted server: Dovecot never
// stops a subscription's notifications on its own, so only a script can
// send NOTIFICATIONOVERFLOW. The wait ends as a transient failure and the
// session is closed: the subscription is gone.
func TestWatchServerEndsNotifications(t *testing.T) {
	t.Parallel()
	srv := imapscript.Start(t, imapscript.WatchServer(func(c *imapscript.Conn, tag string) {
		c.Send(tag + " OK notifying")
	}, func(c *imapscript.Conn, tag string) {
		c.Send("+ idling", "* OK [NOTIFICATIONOVERFLOW] too many changes")
	}))
	b := setup(t, nil)
	ep := b.endpoint(imapx.None)
	ep.Host, ep.Port = srv.Host(), srv.Port()
	s, err := imapx.OpenWatchSession(b.ctx, ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
	require.NoError(t, err)
	defer func() { _ = s.Close() }()
	_, err = s.Subscribe(b.ctx, []string{"INBOX", "Sent"})
	require.NoError(t, err)
	_, err = s.Wait(b.ctx, time.Minute)
	require.ErrorIs(t, err, imapx.ErrNotificationOverflow)
	require.True(t, imapx.IsTransient(err))
	require.False(t, s.Usable())
}

// TestWatchSubscriptionDescribesEachFolder: a subscription reports the
// state of every folder it names as it begins — the open one from its
// EXAMINE, the others from the STATUS responses NOTIFY SET STATUS asks
// Dovecot for — and each is what a read session's EXAMINE of that folder
// reports, so a watch can compare it with what a pass last observed
// without opening the folder. A folder the server does not describe (it
// does not exist) is missing.
func TestWatchSubscriptionDescribesEachFolder(t *testing.T) {
	t.Parallel()
	b := setupWatch(t, nil)
	b.user.Append("Sent", message(1, 200), time.Time{})
	uid := b.user.Append("Sent", message(2, 200), time.Time{})
	b.user.SetFlags("Sent", uid, []imap.Flag{imap.FlagFlagged}, nil)
	b.user.Append("INBOX", message(3, 200), time.Time{})
	states, err := b.sess.Subscribe(b.ctx, []string{"INBOX", "Sent", "Archive", "Nowhere"})
	require.NoError(t, err)
	require.NotContains(t, states, "Nowhere")

	rs := b.open(b.endpoint(imapx.None), imapx.SessionOptions{})
	for _, path := range []string{"INBOX", "Sent", "Archive"} {
		require.Contains(t, states, path)
		want, err := rs.Examine(b.ctx, path)
		require.NoError(t, err)
		require.Equal(t, want, states[path], path)
		require.NotZero(t, states[path].UIDValidity, path)
		require.NotZero(t, states[path].HighestModSeq, "%s: Dovecot reports HIGHESTMODSEQ to a CONDSTORE connection", path)
	}
	require.Equal(t, uint32(2), states["Sent"].Exists)
	require.NoError(t, b.sess.Close())
	requireWatchOnly(t, b.wire)
}
