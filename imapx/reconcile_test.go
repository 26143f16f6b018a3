package imapx_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
)

// The capability lists the fallback paths are tested with. Dovecot still
// honours ENABLE QRESYNC and SELECT (CONDSTORE) when it does not advertise
// them, so these tests show that the client goes by what is advertised.
const (
	capsCondStoreOnly = "IMAP4rev1 IDLE CONDSTORE"
	capsPlain         = "IMAP4rev1 IDLE"
)

// modeServers starts one Dovecot per mode, narrowed by capability.
func modeServers(t *testing.T) map[imapx.ReconcileMode]*dovecot.Server {
	t.Helper()
	return map[imapx.ReconcileMode]*dovecot.Server{
		imapx.QResync:   dovecot.Start(t),
		imapx.CondStore: dovecot.Start(t, dovecot.WithCapability(capsCondStoreOnly)),
		imapx.Plain:     dovecot.Start(t, dovecot.WithCapability(capsPlain)),
	}
}

// wireLog records both directions of every connection an endpoint opens.
type wireLog struct {
	mu    sync.Mutex
	conns []*connLog
}

type connLog struct {
	mu             sync.Mutex
	sent, received bytes.Buffer
	// reads marks, for every read, how much had been received and sent
	// once it was done: the order of the two directions.
	reads []readMark
}

type readMark struct{ received, sent int }

// sentWhenReceived returns what the client had sent when s first arrived
// from the server, or fails t when s never arrived.
func (c *connLog) sentWhenReceived(t *testing.T, s string) string {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	at := strings.Index(c.received.String(), s)
	require.GreaterOrEqual(t, at, 0, "%q was received", s)
	for _, r := range c.reads {
		if r.received >= at+len(s) {
			return c.sent.String()[:r.sent]
		}
	}
	return c.sent.String()
}

func (l *wireLog) dial(target string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		if target != "" {
			addr = target
		}
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		cl := &connLog{}
		l.mu.Lock()
		l.conns = append(l.conns, cl)
		l.mu.Unlock()
		return &loggingConn{Conn: c, log: cl}, nil
	}
}

type loggingConn struct {
	net.Conn
	log *connLog
}

func (c *loggingConn) Write(p []byte) (int, error) {
	c.log.mu.Lock()
	c.log.sent.Write(p)
	c.log.mu.Unlock()
	return c.Conn.Write(p)
}

func (c *loggingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	c.log.mu.Lock()
	c.log.received.Write(p[:n])
	c.log.reads = append(c.log.reads, readMark{received: c.log.received.Len(), sent: c.log.sent.Len()})
	c.log.mu.Unlock()
	return n, err
}

func (c *connLog) lines(received bool) []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	buf := &c.sent
	if received {
		buf = &c.received
	}
	var out []string
	for _, l := range strings.Split(buf.String(), "\r\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// reconciliation returns the connection that carried the reconciliation
// commands (tags R1, R2, ...).
func (l *wireLog) reconciliation(t testing.TB) *connLog {
	t.Helper()
	l.mu.Lock()
	defer l.mu.Unlock()
	var found *connLog
	for _, c := range l.conns {
		for _, line := range c.lines(false) {
			if strings.HasPrefix(line, "R1 ") {
				require.Nil(t, found, "two reconciliation connections")
				found = c
				break
			}
		}
	}
	require.NotNil(t, found, "no reconciliation connection")
	return found
}

// wireAllowed is what the reconciliation connection may send after
// authentication.
var wireAllowed = regexp.MustCompile(`^R\d+ (ENABLE QRESYNC|EXAMINE "[^"]*"( \(CONDSTORE\))?|UID FETCH [0-9:,]+ \((FLAGS UID|FLAGS UID MODSEQ)\)( \(CHANGEDSINCE \d+( VANISHED)?\))?|UID SEARCH (RETURN \(ALL\) )?UID [0-9:,]+|LOGOUT)$`)

// requireReconciliationWire checks every command the reconciliation
// connection sent: go-imap's authentication first (tags T...), then only
// the allowed commands, ENABLE before the first EXAMINE. It returns the
// commands after authentication.
func requireReconciliationWire(t testing.TB, c *connLog) []string {
	t.Helper()
	var cmds []string
	for _, line := range c.lines(false) {
		require.False(t, wiretap.Forbidden(line), "forbidden on the wire: %q", line)
		if !strings.HasPrefix(line, "R") {
			continue // go-imap's greeting-time commands and SASL responses
		}
		require.Regexp(t, wireAllowed, line)
		cmds = append(cmds, line)
	}
	enable := slices.IndexFunc(cmds, func(l string) bool { return strings.Contains(l, " ENABLE ") })
	examine := slices.IndexFunc(cmds, func(l string) bool { return strings.Contains(l, " EXAMINE ") })
	if enable >= 0 {
		require.Equal(t, 0, enable, "ENABLE QRESYNC is the first command after authentication")
		require.Less(t, enable, examine)
	}
	return cmds
}

func contains(lines []string, sub string) bool {
	return slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, sub) })
}

// flagsOf returns a message's flags as a sorted set without \Recent.
func flagsOf(flags []string) string {
	out := slices.Clone(flags)
	out = slices.DeleteFunc(out, func(f string) bool { return strings.EqualFold(f, `\Recent`) })
	slices.Sort(out)
	return strings.Join(out, " ")
}

func serverFlags(u *dovecot.User, folder string, uid uint32) string {
	fs := u.Flags(folder, imap.UID(uid))
	out := make([]string, len(fs))
	for i, f := range fs {
		out[i] = string(f)
	}
	return flagsOf(out)
}

// localCopy is what a reconciliation worker would store: flags by UID.
type localCopy map[uint32]string

// apply applies an answer the way the backward pass does: refreshed flags
// for described UIDs, nothing for confirmed ones, removal for vanished.
func (l localCopy) apply(t testing.TB, window []uint32, a imapx.ReconcileAnswer) {
	t.Helper()
	require.Equal(t, len(window), len(a.Present)+len(a.Vanished), "Present and Vanished partition the window")
	for _, c := range a.Changed {
		require.Contains(t, a.Present, c.UID)
		l[c.UID] = flagsOf(c.Flags)
	}
	for _, uid := range a.Vanished {
		delete(l, uid)
	}
}

// pathResult is what one mode's run of the scenario produced.
type pathResult struct {
	present, vanished []uint32
	final             localCopy
	changed           []uint32
	quiet             imapx.ReconcileAnswer
	wire              *connLog
}

// runScenario seeds twelve messages, reconciles them, lets another client
// change flags and expunge, reconciles again with the recorded
// mod-sequence, and once more with nothing changed. The session is a
// reconciliation session when want is QResync (only it enables QRESYNC),
// otherwise a read session, which asks over its own connection.
func runScenario(t *testing.T, srv *dovecot.Server, want imapx.ReconcileMode) pathResult {
	b := setup(t, srv)
	var uids []uint32
	for i := range 12 {
		var flags []imap.Flag
		if i%3 == 0 {
			flags = append(flags, imap.FlagAnswered)
		}
		uids = append(uids, uint32(b.user.Append("INBOX", message(i, 300), time.Time{}, flags...)))
	}
	var log wireLog
	ep := b.endpoint(imapx.None)
	ep.Dial = log.dial("")
	var s *imapx.ReadSession
	if want == imapx.QResync {
		s = b.openReconcile(ep, imapx.SessionOptions{})
	} else {
		s = b.open(ep, imapx.SessionOptions{})
	}
	require.Equal(t, want, s.ReconcileMode(), "chosen from the advertised capabilities")
	st, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	if want == imapx.Plain {
		require.Zero(t, st.HighestModSeq)
	} else {
		require.NotZero(t, st.HighestModSeq, "Examine reports HIGHESTMODSEQ where CONDSTORE is advertised")
	}

	// First pass: nothing recorded, the whole window is described.
	first, err := s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)
	require.Equal(t, want, first.Mode)
	require.False(t, first.Narrowed)
	require.Equal(t, uids, first.Present)
	require.Empty(t, first.Vanished)
	require.Len(t, first.Changed, len(uids))
	local := localCopy{}
	local.apply(t, uids, first)
	for _, uid := range uids {
		require.Equal(t, serverFlags(b.user, "INBOX", uid), local[uid])
	}
	if want == imapx.Plain {
		require.Zero(t, first.HighestModSeq)
	} else {
		require.Equal(t, b.user.HighestModSeq("INBOX"), first.HighestModSeq)
		for _, c := range first.Changed {
			require.NotZero(t, c.ModSeq)
		}
	}

	// Another client changes flags and expunges.
	b.user.SetFlags("INBOX", imap.UID(uids[1]), []imap.Flag{imap.FlagFlagged}, nil)
	b.user.SetFlags("INBOX", imap.UID(uids[3]), nil, []imap.Flag{imap.FlagAnswered})
	b.user.SetFlags("INBOX", imap.UID(uids[4]), []imap.Flag{imap.FlagDeleted}, nil) // a flag, not a deletion
	b.user.SetFlags("INBOX", imap.UID(uids[5]), []imap.Flag{"$Label1"}, nil)
	b.user.Expunge("INBOX", imap.UID(uids[6]), imap.UID(uids[7]), imap.UID(uids[8]))
	b.user.Expunge("INBOX", imap.UID(uids[10]))

	second, err := s.Reconcile(b.ctx, uids, first.HighestModSeq)
	require.NoError(t, err)
	local.apply(t, uids, second)
	var changed []uint32
	for _, c := range second.Changed {
		changed = append(changed, c.UID)
	}
	if want != imapx.Plain {
		require.True(t, second.Narrowed)
		require.Equal(t, []uint32{uids[1], uids[3], uids[4], uids[5]}, changed, "only the changed messages are described")
		require.Greater(t, second.HighestModSeq, first.HighestModSeq)
	} else {
		require.Equal(t, second.Present, changed, "without mod-sequences every present message is described")
	}

	// Third pass, nothing changed: a narrowed question transfers no flags.
	quiet, err := s.Reconcile(b.ctx, second.Present, second.HighestModSeq)
	require.NoError(t, err)
	require.Equal(t, second.Present, quiet.Present)
	require.Empty(t, quiet.Vanished)
	local.apply(t, second.Present, quiet)

	// The local copy is the server's folder.
	server := localCopy{}
	for _, uid := range toUint32(b.user.UIDs("INBOX")) {
		server[uid] = serverFlags(b.user, "INBOX", uid)
	}
	require.Equal(t, server, local)
	b.requireUnseen("INBOX", second.Present...)
	require.NoError(t, s.Close())
	log.mu.Lock()
	require.Len(t, log.conns, 1, "one connection carried the session and its questions")
	log.mu.Unlock()
	return pathResult{present: second.Present, vanished: second.Vanished, final: local, changed: changed, quiet: quiet, wire: log.reconciliation(t)}
}

// TestReconcileEveryPathSameEndState runs the same scenario on a full
// Dovecot (QResync), one advertising CONDSTORE only (CondStore) and one
// advertising neither (Plain), and checks that each path was taken as the
// advertised capabilities say and that all three reach the same end state.
func TestReconcileEveryPathSameEndState(t *testing.T) {
	t.Parallel()
	results := map[imapx.ReconcileMode]pathResult{}
	var mu sync.Mutex
	for mode, srv := range modeServers(t) {
		t.Run(mode.String(), func(t *testing.T) {
			r := runScenario(t, srv, mode)
			mu.Lock()
			results[mode] = r
			mu.Unlock()
		})
	}
	// A read session on the server that offers QRESYNC asks over its own
	// connection, where QRESYNC stays off: CondStore.
	var read pathResult
	t.Run("read session", func(t *testing.T) {
		read = runScenario(t, dovecot.Start(t), imapx.CondStore)
	})
	require.Len(t, results, 3)

	// The same end state on every path (fresh users: the same UIDs).
	q, c, p := results[imapx.QResync], results[imapx.CondStore], results[imapx.Plain]
	require.Equal(t, []uint32{7, 8, 9, 11}, q.vanished)
	for _, r := range []pathResult{c, p, read} {
		require.Equal(t, q.present, r.present)
		require.Equal(t, q.vanished, r.vanished)
		require.Equal(t, q.final, r.final)
	}
	require.Contains(t, q.final[5], `\Deleted`, "\\Deleted is recorded as a flag")

	// What each path put on the wire.
	for mode, r := range results {
		t.Logf("%s sent: %q", mode, r.wire.lines(false))
	}
	t.Logf("qresync received: %q", q.wire.lines(true))
	qc := requireReconciliationWire(t, q.wire)
	require.True(t, strings.HasSuffix(qc[0], " ENABLE QRESYNC"), "%v", qc)
	require.True(t, contains(qc, "EXAMINE \"INBOX\""))
	require.False(t, contains(qc, "(CONDSTORE)"), "QRESYNC enables CONDSTORE by itself")
	require.True(t, contains(qc, "VANISHED)"))
	require.False(t, contains(qc, "UID SEARCH"), "existence comes from the VANISHED report")
	require.True(t, contains(q.wire.lines(true), "* VANISHED (EARLIER) 7:9,11"), "ranges in the VANISHED report")

	rc := requireReconciliationWire(t, read.wire)
	require.False(t, contains(rc, "ENABLE"), "go-imap's connection never enables QRESYNC")
	require.True(t, contains(rc, "(CHANGEDSINCE "))
	require.False(t, contains(rc, "VANISHED"))
	require.True(t, contains(read.wire.lines(false), " EXAMINE \"INBOX\" (CONDSTORE)"), "go-imap opened the folder first")

	cc := requireReconciliationWire(t, c.wire)
	require.False(t, contains(cc, "ENABLE"))
	require.True(t, contains(cc, "EXAMINE \"INBOX\" (CONDSTORE)"))
	require.True(t, contains(cc, "UID SEARCH UID 1:12"), "existence from the search (no ESEARCH advertised)")
	require.True(t, contains(cc, "(CHANGEDSINCE "))
	require.False(t, contains(cc, "VANISHED"))

	pc := requireReconciliationWire(t, p.wire)
	for _, l := range pc {
		require.NotRegexp(t, `ENABLE|CONDSTORE|CHANGEDSINCE|MODSEQ|UID SEARCH`, l)
	}
	require.True(t, contains(pc, "UID FETCH 1:12 (FLAGS UID)"))

	// The quiet pass: no FETCH response at all where the question is
	// narrowed; every present message described otherwise.
	require.Zero(t, q.quiet.FetchResponses)
	require.Zero(t, c.quiet.FetchResponses)
	require.Equal(t, len(p.present), p.quiet.FetchResponses)
}

// TestReconcileFirstPassAndNarrowing: with sinceModSeq 0 the whole window
// is described on every path and existence still comes out right; with a
// recorded sequence only what changed is.
func TestReconcileFirstPassAndNarrowing(t *testing.T) {
	t.Parallel()
	for mode, srv := range modeServers(t) {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv)
			uids := toUint32(b.user.SeedMaildir("INBOX", seedMessages(20)))
			s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
			st, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			recorded := st.HighestModSeq

			b.user.Expunge("INBOX", imap.UID(uids[0]), imap.UID(uids[19]))
			b.user.SetFlags("INBOX", imap.UID(uids[10]), []imap.Flag{imap.FlagFlagged}, nil)

			// Nothing recorded: every present UID is described, the two
			// expunged ones are vanished.
			all, err := s.Reconcile(b.ctx, uids, 0)
			require.NoError(t, err)
			require.False(t, all.Narrowed)
			require.Equal(t, uids[1:19], all.Present)
			require.Equal(t, []uint32{uids[0], uids[19]}, all.Vanished)
			require.Len(t, all.Changed, 18)

			narrowed, err := s.Reconcile(b.ctx, uids, recorded)
			require.NoError(t, err)
			require.Equal(t, all.Present, narrowed.Present)
			require.Equal(t, all.Vanished, narrowed.Vanished)
			if mode == imapx.Plain {
				require.False(t, narrowed.Narrowed)
				require.Len(t, narrowed.Changed, 18)
				return
			}
			require.True(t, narrowed.Narrowed)
			require.Len(t, narrowed.Changed, 1)
			require.Equal(t, uids[10], narrowed.Changed[0].UID)
			require.Equal(t, []string{`\Flagged`}, narrowed.Changed[0].Flags)
			require.Greater(t, narrowed.Changed[0].ModSeq, recorded)

			// A recorded sequence above the folder's HIGHESTMODSEQ cannot
			// be trusted: the whole window is asked.
			ahead, err := s.Reconcile(b.ctx, uids, narrowed.HighestModSeq+1000)
			require.NoError(t, err)
			require.False(t, ahead.Narrowed)
			require.Len(t, ahead.Changed, 18)
			require.Equal(t, all.Vanished, ahead.Vanished)
		})
	}
}

func seedMessages(n int) []dovecot.SeedMessage {
	msgs := make([]dovecot.SeedMessage, n)
	for i := range msgs {
		msgs[i] = dovecot.SeedMessage{Raw: message(i, 200)}
	}
	return msgs
}

// TestReconcileLargeWindow: a 10 000-UID window goes out as one compressed
// range; a scattered one is split into commands of bounded length, and
// both are answered completely.
func TestReconcileLargeWindow(t *testing.T) {
	t.Parallel()
	for mode, srv := range modeServers(t) {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv)
			uids := toUint32(b.user.SeedMaildir("INBOX", seedMessages(10_000)))
			var log wireLog
			ep := b.endpoint(imapx.None)
			ep.Dial = log.dial("")
			s := b.open(ep, imapx.SessionOptions{})
			st, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)

			gone := []imap.UID{imap.UID(uids[0]), imap.UID(uids[5000]), imap.UID(uids[5001]), imap.UID(uids[9999])}
			b.user.Expunge("INBOX", gone...)

			ans, err := s.Reconcile(b.ctx, uids, st.HighestModSeq)
			require.NoError(t, err)
			require.Len(t, ans.Present, 9_996)
			require.Equal(t, toUint32(gone), ans.Vanished)

			// Every other UID of the 10 000, hundreds of ranges that do not
			// fit one command line.
			var scattered []uint32
			for i := 0; i < len(uids); i += 2 {
				scattered = append(scattered, uids[i])
			}
			ans, err = s.Reconcile(b.ctx, scattered, 0)
			require.NoError(t, err)
			require.Len(t, ans.Present, len(scattered)-2)
			require.Equal(t, []uint32{uids[0], uids[5000]}, ans.Vanished)
			require.Len(t, ans.Changed, len(scattered)-2)

			cmds := requireReconciliationWire(t, log.reconciliation(t))
			first := slices.IndexFunc(cmds, func(l string) bool { return strings.Contains(l, "UID ") })
			require.Regexp(t, fmt.Sprintf(` %d:%d( |$)`, uids[0], uids[9999]), cmds[first], "one compressed range")
			fetches := 0
			for _, l := range cmds {
				require.LessOrEqual(t, len(l), 8192, "command line length (RFC 7162 §4)")
				if strings.Contains(l, "UID FETCH") {
					fetches++
				}
			}
			require.Greater(t, fetches, 3, "the scattered window took several commands")
		})
	}
}

// TestReconcileUIDValidityChange: a folder recreated since Examine yields
// ErrMailboxFolderRecreated and no answer, so nothing can be read as gone.
func TestReconcileUIDValidityChange(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	b.user.CreateFolder("Work")
	uids := toUint32(b.user.SeedMaildir("Work", seedMessages(5)))
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	st, err := s.Examine(b.ctx, "Work")
	require.NoError(t, err)
	_, err = s.Reconcile(b.ctx, uids, st.HighestModSeq)
	require.NoError(t, err)

	b.user.RecreateFolder("Work")
	ans, err := s.Reconcile(b.ctx, uids, st.HighestModSeq)
	require.ErrorIs(t, err, imapx.ErrMailboxFolderRecreated)
	require.Zero(t, ans.Vanished)
	require.False(t, imapx.IsTransient(err))
	_, err = s.FetchMetadata(b.ctx, uids)
	require.ErrorIs(t, err, imapx.ErrMailboxFolderRecreated, "the session refuses until the next Examine")

	st2, err := s.Examine(b.ctx, "Work")
	require.NoError(t, err)
	require.NotEqual(t, st.UIDValidity, st2.UIDValidity)
	ans, err = s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)
	require.Equal(t, uids, ans.Vanished, "asked under the new UIDVALIDITY, the old UIDs are not there")
}

// TestReconcileFolderNames: a folder whose name needs modified UTF-7 and
// quoting is opened on the reconciliation connection too.
func TestReconcileFolderNames(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	for _, folder := range []string{`Účty & Zprávy/日本語`, `Quote " and \ backslash`, "INBOX"} {
		if folder != "INBOX" {
			b.user.CreateFolder(folder)
		}
		uid := uint32(b.user.Append(folder, message(1, 100), time.Time{}, imap.FlagFlagged))
		s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
		_, err := s.Examine(b.ctx, folder)
		require.NoError(t, err, folder)
		ans, err := s.Reconcile(b.ctx, []uint32{uid, uid + 1}, 0)
		require.NoError(t, err, folder)
		require.Equal(t, []uint32{uid}, ans.Present)
		require.Equal(t, []string{`\Flagged`}, ans.Changed[0].Flags)
	}
}

// TestExistingUIDs is the confirmation a caller runs before applying a
// large disappearance: UID SEARCH only.
func TestExistingUIDs(t *testing.T) {
	t.Parallel()
	for mode, srv := range modeServers(t) {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv)
			uids := toUint32(b.user.SeedMaildir("INBOX", seedMessages(6)))
			var log wireLog
			ep := b.endpoint(imapx.None)
			ep.Dial = log.dial("")
			s := b.open(ep, imapx.SessionOptions{})
			_, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			b.user.Expunge("INBOX", imap.UID(uids[2]), imap.UID(uids[3]))
			got, err := s.ExistingUIDs(b.ctx, append(slices.Clone(uids), 9999))
			require.NoError(t, err)
			require.Equal(t, []uint32{uids[0], uids[1], uids[4], uids[5]}, got)
			cmds := requireReconciliationWire(t, log.reconciliation(t))
			require.False(t, contains(cmds, "UID FETCH"), "identifiers only")
			require.True(t, contains(cmds, "UID SEARCH"))
		})
	}
}

// TestReconcileExpungeDuringPass: a message expunged by another session
// after a pass, while the reconciliation connection still has the folder
// open, is vanished in the next pass and absent from ExistingUIDs.
func TestReconcileExpungeDuringPass(t *testing.T) {
	t.Parallel()
	for mode, srv := range modeServers(t) {
		t.Run(mode.String(), func(t *testing.T) {
			t.Parallel()
			b := setup(t, srv)
			uids := toUint32(b.user.SeedMaildir("INBOX", seedMessages(8)))
			s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
			st, err := s.Examine(b.ctx, "INBOX")
			require.NoError(t, err)
			_, err = s.Reconcile(b.ctx, uids, st.HighestModSeq)
			require.NoError(t, err)
			// The reconciliation connection still has INBOX open: the next
			// pass EXAMINEs again, and the server reports the expunge.
			b.user.Expunge("INBOX", imap.UID(uids[3]))
			ans, err := s.Reconcile(b.ctx, uids, st.HighestModSeq)
			require.NoError(t, err)
			require.Equal(t, []uint32{uids[3]}, ans.Vanished)
			existing, err := s.ExistingUIDs(b.ctx, uids)
			require.NoError(t, err)
			require.Equal(t, ans.Present, existing)
		})
	}
}

// TestReconcileRecover: a reconciliation connection that stops answering
// costs one CommandTimeout and a transient error; Recover replaces it.
func TestReconcileRecover(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids := toUint32(b.user.SeedMaildir("INBOX", seedMessages(3)))
	p := faultproxy.Start(t, b.srv.TLSAddr())
	ep := b.endpoint(imapx.TLSOnConnect)
	ep.Dial = (&recorder{}).Dial(p.Addr())
	s := b.open(ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	_, err = s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)

	p.StallAll()
	start := time.Now()
	_, err = s.Reconcile(b.ctx, uids, 0)
	require.True(t, imapx.IsTransient(err), "%v", err)
	require.Less(t, time.Since(start), 2*stallTimeout)
	_, err = s.Reconcile(b.ctx, uids, 0)
	require.True(t, imapx.IsTransient(err), "fails fast until Recover: %v", err)

	p.Heal()
	_, err = s.Recover(b.ctx)
	require.NoError(t, err)
	ans, err := s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)
	require.Equal(t, uids, ans.Present)
}

// TestReconcileItemsCarryNoContent: the item set is FLAGS and UID, nothing
// that could set \Seen or carry message content.
func TestReconcileItemsCarryNoContent(t *testing.T) {
	content := regexp.MustCompile(`(?i)BODY|BINARY|RFC822|ENVELOPE|HEADER|TEXT|PREVIEW|SNIPPET|\[`)
	for _, it := range imapx.ReconcileItems {
		require.NotRegexp(t, content, string(it))
	}
	require.ElementsMatch(t, []imapx.FetchItem{imapx.FetchFlags, imapx.FetchUID}, imapx.ReconcileItems[:])
	require.NotRegexp(t, content, string(imapx.FetchModSeq))
}

// TestReconcileNeedsAFolderAndAValidWindow covers the caller's errors.
func TestReconcileNeedsAFolderAndAValidWindow(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Reconcile(b.ctx, []uint32{1}, 0)
	require.ErrorIs(t, err, imapx.ErrNoFolder)
	st, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	_, err = s.Reconcile(b.ctx, []uint32{0, 1}, 0)
	require.Error(t, err)
	_, err = s.Reconcile(b.ctx, make([]uint32, imapx.MaxReconcileWindow+1), 0)
	require.Error(t, err)
	ans, err := s.Reconcile(b.ctx, nil, 0)
	require.NoError(t, err)
	require.Equal(t, st.HighestModSeq, ans.HighestModSeq, "an empty window asks nothing")
	require.Empty(t, ans.Present)
}

// TestReconcileSecurityModes: the reconciliation connection is established
// like the session's own in every mode (implicit TLS, STARTTLS, none) and
// taken over from go-imap once authenticated; with TLS nothing of the
// conversation crosses in clear text.
func TestReconcileSecurityModes(t *testing.T) {
	t.Parallel()
	for _, sec := range []imapx.ConnectionSecurity{imapx.TLSOnConnect, imapx.StartTLSRequired, imapx.None} {
		t.Run(string(sec), func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			uids := toUint32(b.user.SeedMaildir("INBOX", seedMessages(3)))
			var log wireLog
			ep := b.endpoint(sec)
			ep.Dial = log.dial("")
			for _, open := range []func(imapx.Endpoint, imapx.SessionOptions) *imapx.ReadSession{b.open, b.openReconcile} {
				s := open(ep, imapx.SessionOptions{})
				_, err := s.Examine(b.ctx, "INBOX")
				require.NoError(t, err)
				for range 2 {
					ans, err := s.Reconcile(b.ctx, uids, 0)
					require.NoError(t, err)
					require.Equal(t, uids, ans.Present)
				}
				require.NoError(t, s.Close())
			}

			log.mu.Lock()
			conns := slices.Clone(log.conns)
			log.mu.Unlock()
			require.Len(t, conns, 2, "one connection per session, its questions asked over it")
			for _, c := range conns {
				sent := strings.Join(c.lines(false), "\n")
				require.Equal(t, sec == imapx.None, strings.Contains(sent, "UID FETCH"), "clear text")
			}
			// Dovecot's log process writes the lines a moment after the
			// logins they record.
			login := "Login: user=<" + b.user.Name() + ">"
			poll.UntilTrue(t, dovecot.LogWait, "Dovecot logs both logins", func() bool {
				return strings.Count(b.srv.Log(), login) >= 2
			})
			require.Equal(t, 2, strings.Count(b.srv.Log(), login))
		})
	}
}
