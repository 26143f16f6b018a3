package backwardpass_test

import (
	"context"
	"io"
	"log/slog"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/backwardpass"
	"github.com/mailfathom/mailfathom/internal/forwardpass"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestMain(m *testing.M) {
	defer dovecot.StopShared()
	pgtest.Main(m)
}

// folder is the folder every test binds: one that can be deleted and
// created again, which INBOX cannot.
const folder = "Archive"

// testBundle is a database with folder of a fresh Dovecot user bound, a
// connection for the passes to write on, and a recorder of what the
// sessions send.
type testBundle struct {
	ctx     context.Context
	pool    *pgxpool.Pool
	conn    *pgxpool.Conn
	binding mailstore.Binding
	srv     *dovecot.Server
	user    *dovecot.User
	tap     *wiretap.Recorder
	logger  *slog.Logger
}

// setup binds folder of a new user of srv (the shared Dovecot when nil)
// holding n small messages, seeded by writing its Maildir.
func setup(t testing.TB, srv *dovecot.Server, n int) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
	t.Cleanup(cancel)
	if srv == nil {
		srv = dovecot.Shared(t)
	}
	b := &testBundle{ctx: ctx, pool: dbtest.Pool(t), srv: srv, user: srv.NewUser(), tap: &wiretap.Recorder{},
		logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	b.user.CreateFolder(folder)
	b.seed(t, 0, n)

	accountID, err := mailstore.EnsureAccount(ctx, b.pool, "primary")
	require.NoError(t, err)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	b.binding, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, folder, folder, "/")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	b.conn, err = b.pool.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(b.conn.Release)
	return b
}

// seed writes n messages numbered from first into folder's Maildir.
func (b *testBundle) seed(t testing.TB, first, n int) {
	t.Helper()
	const chunk = 5000
	for i := 0; i < n; i += chunk {
		msgs := make([]dovecot.SeedMessage, 0, min(chunk, n-i))
		for j := i; j < n && j < i+chunk; j++ {
			msgs = append(msgs, dovecot.SeedMessage{Raw: mailgen.Message(31, first+j, 600)})
		}
		b.user.SeedMaildir(folder, msgs)
	}
}

// open opens a read session over the plain listener, recorded by b.tap,
// and closes it when the test ends. A backward pass asks over its own
// connection, in CondStore mode at most.
func (b *testBundle) open(t testing.TB) *imapx.ReadSession {
	t.Helper()
	return b.openWith(t, imapx.OpenReadSession)
}

// openReconcile is open for a session of OpenReconcileSession, which
// enables QRESYNC where the server offers it.
func (b *testBundle) openReconcile(t testing.TB) *imapx.ReadSession {
	t.Helper()
	return b.openWith(t, imapx.OpenReconcileSession)
}

// backward returns the session a test's backward passes ask over: sess, a
// read session, or one of OpenReconcileSession when reconcile.
func (b *testBundle) backward(t testing.TB, sess *imapx.ReadSession, reconcile bool) *imapx.ReadSession {
	t.Helper()
	if reconcile {
		return b.openReconcile(t)
	}
	return sess
}

func (b *testBundle) openWith(t testing.TB, open func(context.Context, imapx.Endpoint, imapx.SessionOptions) (*imapx.ReadSession, error)) *imapx.ReadSession {
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

// storeAll runs forward passes until the folder is stored.
func (b *testBundle) storeAll(t testing.TB, sess forwardpass.Session) {
	t.Helper()
	opts := forwardpass.Options{BatchSize: 2000, BatchesPerRun: 1000, MaxRawMimeBytes: 1 << 20, GroupMessages: 500,
		Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000}}
	for {
		rep, err := forwardpass.Run(b.ctx, b.conn, sess, b.binding, opts, b.logger)
		require.NoError(t, err)
		if !rep.More {
			return
		}
	}
}

// pass runs one backward pass with a window of size.
func (b *testBundle) pass(t testing.TB, sess backwardpass.Session, size int) backwardpass.Report {
	t.Helper()
	rep, err := backwardpass.Run(b.ctx, b.conn, sess, b.binding,
		backwardpass.Options{WindowSize: size, Disposition: mailstore.RetainTombstone}, b.logger)
	require.NoError(t, err)
	return rep
}

// storedBeforeSequences leaves the folder as a version of MailFathom that
// neither stored the flags it fetched as observations nor tracked
// modification sequences would have left it: every occurrence never
// observed, no sequence and no cycle. A reconciliation cycle of the
// backward pass's own starts from there (as it does once a server reports
// sequences again after it stopped).
func (b *testBundle) storedBeforeSequences(t testing.TB) {
	t.Helper()
	dbassert.ForgetObservedFlags(t, b.pool, b.binding.ID)
	require.NoError(t, mailstore.ForgetModSeq(b.ctx, b.pool, b.binding.ID, b.checkpoint(t).UIDValidity))
}

// passUntilCycleEnds runs passes until one completes the reconciliation
// cycle, and returns how many it took; no sequence is recorded before.
func (b *testBundle) passUntilCycleEnds(t testing.TB, sess backwardpass.Session, size, most int) int {
	t.Helper()
	for n := 1; n <= most; n++ {
		rep := b.pass(t, sess, size)
		require.False(t, rep.Narrowed)
		if strings.Contains(rep.Cycle, "completed") {
			return n
		}
		require.Nil(t, b.checkpoint(t).HighestModSeq, "pass %d recorded a sequence before the cycle ended", n)
	}
	t.Fatalf("the cycle did not end within %d passes", most)
	return 0
}

func (b *testBundle) checkpoint(t testing.TB) mailstore.Checkpoint {
	t.Helper()
	cp, ok, err := mailstore.ReadCheckpoint(b.ctx, b.pool, b.binding.ID)
	require.NoError(t, err)
	require.True(t, ok)
	return cp
}

// local reads the stored state of one UID of the checkpoint's UID space:
// its flags, and " [tombstone]" once its disappearance was observed.
func (b *testBundle) local(t testing.TB, uid imap.UID) string {
	t.Helper()
	return dbassert.OccurrenceAt(t, b.pool, b.binding.ID, b.checkpoint(t).UIDValidity, uint32(uid)).State()
}

// examined is an EXAMINE command line.
var examined = regexp.MustCompile(`^\S+ EXAMINE `)

// commandsAfterExamine counts, for each connection recorded since the last
// Reset, the commands it sent after its last EXAMINE.
func commandsAfterExamine(tap *wiretap.Recorder) []int {
	var out []int
	for _, lines := range tap.Conns() {
		n := -1
		for _, l := range lines {
			switch {
			case examined.MatchString(l):
				n = 0
			case n >= 0:
				n++
			}
		}
		out = append(out, max(n, 0))
	}
	return out
}

// TestCycleNarrowsAFolderLargerThanTheWindow: a folder five times the
// window, stored before sequences were tracked, is walked through one
// cycle, which records the sequence observed when it began; from then on
// every pass asks the whole folder what changed, so a quiet pass sends a
// command or two and a flag change and an expunge far from any window are
// both seen by the next pass. Without modification sequences passes stay
// window by window.
func TestCycleNarrowsAFolderLargerThanTheWindow(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		capability string // empty: the shared Dovecot, which offers QRESYNC
		mode       string
		// reconcile: the backward passes ask over a session of
		// OpenReconcileSession rather than the read session.
		reconcile bool
	}{
		"QResync":     {"", "QRESYNC", true},
		"ReadSession": {"", "CONDSTORE", false},
		"CondStore":   {"IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN CONDSTORE ESEARCH", "CONDSTORE", false},
		"Plain":       {"IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN", "FLAGS", false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			var srv *dovecot.Server
			if tc.capability != "" {
				srv = dovecot.Start(t, dovecot.WithCapability(tc.capability))
			}
			b := setup(t, srv, 50)
			sess := b.open(t)
			b.storeAll(t, sess)
			b.storedBeforeSequences(t)
			sess = b.backward(t, sess, tc.reconcile)

			if tc.mode == "FLAGS" {
				for range 12 {
					rep := b.pass(t, sess, 10)
					require.False(t, rep.Narrowed)
					require.LessOrEqual(t, rep.Window, 10, "without sequences a pass costs one window")
					require.Empty(t, rep.Cycle)
				}
				cp := b.checkpoint(t)
				require.Nil(t, cp.HighestModSeq)
				require.Nil(t, cp.Cycle)
				return
			}

			passes := b.passUntilCycleEnds(t, sess, 10, 15)
			require.GreaterOrEqual(t, passes, 5, "no pass of 10 covers 50 messages")
			require.NotNil(t, b.checkpoint(t).HighestModSeq)
			require.Nil(t, b.checkpoint(t).Cycle)

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

			b.user.SetFlags(folder, 37, []imap.Flag{imap.FlagFlagged}, nil)
			b.user.Expunge(folder, 23)
			rep = b.pass(t, sess, 10)
			require.True(t, rep.Narrowed)
			require.Equal(t, 1, rep.Refreshed)
			require.Equal(t, 1, rep.Tombstoned)
			require.Equal(t, `\Flagged`, b.local(t, 37))
			require.Equal(t, ` [tombstone]`, b.local(t, 23))
			require.Equal(t, b.user.HighestModSeq(folder), *b.checkpoint(t).HighestModSeq)
		})
	}
}

// killedSession answers like the session it wraps but ends the pass's
// context as soon as the server has answered: the process dying between
// asking and committing.
type killedSession struct {
	backwardpass.Session
	kill context.CancelFunc
}

func (s killedSession) Reconcile(ctx context.Context, window []uint32, since uint64) (imapx.ReconcileAnswer, error) {
	ans, err := s.Session.Reconcile(ctx, window, since)
	s.kill()
	return ans, err
}

// TestCycleSurvivesAKill: a pass killed after the server answered commits
// nothing — neither a cycle nor a sequence — and the cycle a restarted
// process resumes is the one begun before the kill: it records the
// sequence observed when the cycle began, not one current when it ends, so
// a flag changed mid-cycle is still asked about afterwards.
func TestCycleSurvivesAKill(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, 30)
	sess := b.open(t)
	b.storeAll(t, sess)
	b.storedBeforeSequences(t)

	killedPass := func(sess backwardpass.Session) {
		t.Helper()
		ctx, kill := context.WithCancel(b.ctx)
		defer kill()
		// The kill takes the database connection with it, as a process
		// dying would.
		conn, err := b.pool.Acquire(b.ctx)
		require.NoError(t, err)
		defer conn.Release()
		_, err = backwardpass.Run(ctx, conn, killedSession{Session: sess, kill: kill}, b.binding,
			backwardpass.Options{WindowSize: 10, Disposition: mailstore.RetainTombstone}, b.logger)
		require.ErrorIs(t, err, context.Canceled)
	}
	killedPass(sess)
	require.Nil(t, b.checkpoint(t).Cycle, "a killed first pass starts no cycle")

	require.Equal(t, "started", b.pass(t, sess, 10).Cycle)
	began := b.checkpoint(t).Cycle
	require.NotNil(t, began)
	b.user.SetFlags(folder, 3, []imap.Flag{imap.FlagAnswered}, nil)
	require.Greater(t, b.user.HighestModSeq(folder), began.ModSeq)

	// Every later pass is killed once before it runs for real, by a
	// process that is then replaced.
	for n := 1; ; n++ {
		require.Less(t, n, 15, "the cycle did not end")
		killedPass(b.open(t))
		cp := b.checkpoint(t)
		require.Nil(t, cp.HighestModSeq, "a killed pass records nothing")
		require.Equal(t, began.ModSeq, cp.Cycle.ModSeq, "a killed pass restarts nothing")
		require.True(t, began.StartedAt.Equal(cp.Cycle.StartedAt))

		rep := b.pass(t, b.open(t), 10)
		if strings.Contains(rep.Cycle, "completed") {
			break
		}
		require.Equal(t, began.ModSeq, b.checkpoint(t).Cycle.ModSeq, "a resumed cycle keeps its sequence")
	}
	cp := b.checkpoint(t)
	require.Equal(t, began.ModSeq, *cp.HighestModSeq, "the sequence the cycle began with, not the current one")
	require.Nil(t, cp.Cycle)

	rep := b.pass(t, sess, 10)
	require.True(t, rep.Narrowed)
	require.Equal(t, `\Answered`, b.local(t, 3))
	require.Equal(t, b.user.HighestModSeq(folder), *b.checkpoint(t).HighestModSeq)
}

// TestCycleEndsWithTheUIDSpace: a folder recreated under another
// UIDVALIDITY drops the cycle in progress when the forward pass resets the
// checkpoint, and the new UID space's first synchronization records a
// sequence of its own.
func TestCycleEndsWithTheUIDSpace(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, 30)
	sess := b.open(t)
	b.storeAll(t, sess)
	b.storedBeforeSequences(t)
	// The old UID space's sequence moves well past where the new one's
	// starts, so the two cannot be mistaken for each other.
	for uid := imap.UID(1); uid <= 5; uid++ {
		b.user.SetFlags(folder, uid, []imap.Flag{imap.FlagFlagged}, nil)
	}
	require.Equal(t, "started", b.pass(t, sess, 10).Cycle)
	old := b.checkpoint(t)
	require.NotNil(t, old.Cycle)

	validity := b.user.RecreateFolder(folder)
	b.seed(t, 100, 20)
	began := b.user.HighestModSeq(folder)
	require.Less(t, began, old.Cycle.ModSeq)
	fresh := b.open(t)
	b.storeAll(t, fresh)
	cp := b.checkpoint(t)
	require.Equal(t, validity, cp.UIDValidity)
	require.Nil(t, cp.Cycle)
	require.Equal(t, began, *cp.HighestModSeq, "a cycle of the abandoned UID space is dropped with it")
	require.True(t, b.pass(t, fresh, 10).Narrowed)
}

// TestCycleForgottenWhenTheServerLosesCondStore: a server that stops
// advertising CONDSTORE (restarted with another capability list) drops the
// recorded sequence, and the folder is asked about window by window until
// the server reports sequences again, which starts a new cycle.
func TestCycleForgottenWhenTheServerLosesCondStore(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t)
	b := setup(t, srv, 20)
	sess := b.open(t)
	b.storeAll(t, sess)
	require.NotNil(t, b.checkpoint(t).HighestModSeq)

	srv.RestartWith(dovecot.WithCapability("IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN"))
	rep := b.pass(t, b.open(t), 10)
	require.False(t, rep.Narrowed)
	require.Equal(t, "FLAGS", rep.Mode)
	require.Equal(t, "forgotten", rep.Cycle)
	require.LessOrEqual(t, rep.Window, 10, "the window bounds the pass again")
	cp := b.checkpoint(t)
	require.Nil(t, cp.HighestModSeq)
	require.Nil(t, cp.Cycle)

	srv.RestartWith(dovecot.WithCapability(""))
	rep = b.pass(t, b.open(t), 10)
	require.False(t, rep.Narrowed)
	require.Equal(t, "started", rep.Cycle)
}
