package backwardpass_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
)

// cyrusFolder is the folder the Cyrus tests bind: one of the user's own,
// which Cyrus lets the user delete and create again (it protects its
// special-use folders, Archive among them).
const cyrusFolder = "Filed"

// cyrusBundle is a testBundle on Cyrus: cyrusFolder of a new user of srv
// bound, holding n small messages. The bundle's Dovecot fields stay nil.
type cyrusBundle struct {
	*testBundle
	srv  *cyrus.Server
	user *cyrus.User
}

func setupCyrus(t testing.TB, srv *cyrus.Server, n int) *cyrusBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	t.Cleanup(cancel)
	b := &cyrusBundle{
		testBundle: &testBundle{ctx: ctx, pool: dbtest.Pool(t), tap: &wiretap.Recorder{},
			logger: slog.New(slog.NewTextHandler(io.Discard, nil))},
		srv:  srv,
		user: srv.NewUser(),
	}
	b.user.CreateFolder(cyrusFolder)
	for i := range n {
		b.user.Append(cyrusFolder, mailgen.Message(31, i, 600), time.Time{})
	}
	accountID, err := mailstore.EnsureAccount(ctx, b.pool, "primary")
	require.NoError(t, err)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	b.binding, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, cyrusFolder, cyrusFolder, "/")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	b.conn, err = b.pool.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(b.conn.Release)
	return b
}

// open opens a read session over the plain listener, recorded by b.tap,
// and closes it when the test ends.
func (b *cyrusBundle) open(t testing.TB) *imapx.ReadSession {
	t.Helper()
	return b.openWith(t, imapx.OpenReadSession)
}

// backward returns the session a test's backward passes ask over: sess, a
// read session, or one of OpenReconcileSession when reconcile.
func (b *cyrusBundle) backward(t testing.TB, sess *imapx.ReadSession, reconcile bool) *imapx.ReadSession {
	t.Helper()
	if reconcile {
		return b.openWith(t, imapx.OpenReconcileSession)
	}
	return sess
}

func (b *cyrusBundle) openWith(t testing.TB, open func(context.Context, imapx.Endpoint, imapx.SessionOptions) (*imapx.ReadSession, error)) *imapx.ReadSession {
	t.Helper()
	host, port, err := net.SplitHostPort(b.srv.Addr())
	require.NoError(t, err)
	portNum, err := strconv.Atoi(port)
	require.NoError(t, err)
	password := b.user.Password()
	s, err := open(b.ctx, imapx.Endpoint{
		AccountID: "primary", Host: host, Port: portNum, Security: imapx.None, Username: b.user.Name(),
		Password:                func(context.Context) ([]byte, error) { return []byte(password), nil },
		AllowInsecureConnection: true, AllowClearTextOverUnencrypted: true,
		Dial: b.tap.Dial(""),
	}, imapx.SessionOptions{})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// TestCyrusCycleNarrowsAFolderLargerThanTheWindow is
// TestCycleNarrowsAFolderLargerThanTheWindow on Cyrus: one cycle walks a
// folder five times the window; from then on a quiet pass sends a command
// or two after EXAMINE, and a flag change and an expunge far from any
// window are seen by the next pass, asked with CHANGEDSINCE.
func TestCyrusCycleNarrowsAFolderLargerThanTheWindow(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		opts []cyrus.Option // nil: the shared Cyrus, which offers QRESYNC
		mode string
		// reconcile: the backward passes ask over a session of
		// OpenReconcileSession rather than the read session.
		reconcile bool
	}{
		"QResync":     {nil, "QRESYNC", true},
		"ReadSession": {nil, "CONDSTORE", false},
		"CondStore":   {[]cyrus.Option{cyrus.WithoutCapabilities("QRESYNC")}, "CONDSTORE", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := cyrus.Shared(t)
			if tc.opts != nil {
				srv = cyrus.Start(t, tc.opts...)
			}
			b := setupCyrus(t, srv, 50)
			sess := b.open(t)
			b.storeAll(t, sess)
			b.storedBeforeSequences(t)
			sess = b.backward(t, sess, tc.reconcile)

			passes := b.passUntilCycleEnds(t, sess, 10, 15)
			require.GreaterOrEqual(t, passes, 5, "no pass of 10 covers 50 messages")
			require.NotNil(t, b.checkpoint(t).HighestModSeq)

			b.tap.Reset()
			quiet := b.backward(t, b.open(t), tc.reconcile)
			rep := b.pass(t, quiet, 10)
			require.True(t, rep.Narrowed)
			require.Equal(t, tc.mode, rep.Mode)
			require.Zero(t, rep.Window, "nothing changed")
			require.NoError(t, quiet.Close())
			for i, n := range commandsAfterExamine(b.tap) {
				require.LessOrEqual(t, n, 3, "connection %d: %v", i, b.tap.Conns()[i])
			}
			for _, l := range b.tap.Lines() {
				require.False(t, wiretap.Forbidden(l), l)
			}
			require.Contains(t, b.tap.String(), "(CHANGEDSINCE ")

			b.user.SetFlags(cyrusFolder, 37, []imap.Flag{imap.FlagFlagged}, nil)
			b.user.Expunge(cyrusFolder, 23)
			rep = b.pass(t, sess, 10)
			require.True(t, rep.Narrowed)
			require.Equal(t, 1, rep.Refreshed)
			require.Equal(t, 1, rep.Tombstoned)
			require.Equal(t, `\Flagged`, b.local(t, 37))
			require.Equal(t, ` [tombstone]`, b.local(t, 23))
			require.Equal(t, b.user.HighestModSeq(cyrusFolder), *b.checkpoint(t).HighestModSeq)
		})
	}
}

// TestCyrusCycleEndsWithTheUIDSpace is TestCycleEndsWithTheUIDSpace on
// Cyrus: the folder recreated under another UIDVALIDITY drops the cycle in
// progress, and the new UID space's first synchronization records a
// sequence of its own. (Cyrus numbers sequences per user, not per folder,
// so the new space's may be above the old one's.)
func TestCyrusCycleEndsWithTheUIDSpace(t *testing.T) {
	t.Parallel()
	b := setupCyrus(t, cyrus.Shared(t), 30)
	sess := b.open(t)
	b.storeAll(t, sess)
	b.storedBeforeSequences(t)
	require.Equal(t, "started", b.pass(t, sess, 10).Cycle)
	require.NotNil(t, b.checkpoint(t).Cycle)

	validity := b.user.RecreateFolder(cyrusFolder)
	for i := range 20 {
		b.user.Append(cyrusFolder, mailgen.Message(31, 100+i, 600), time.Time{})
	}
	began := b.user.HighestModSeq(cyrusFolder)
	fresh := b.open(t)
	b.storeAll(t, fresh)
	cp := b.checkpoint(t)
	require.Equal(t, validity, cp.UIDValidity)
	require.Nil(t, cp.Cycle, "a cycle of the abandoned UID space is dropped with it")
	require.NotNil(t, cp.HighestModSeq)
	require.Equal(t, began, *cp.HighestModSeq)
	require.True(t, b.pass(t, fresh, 10).Narrowed)
}
