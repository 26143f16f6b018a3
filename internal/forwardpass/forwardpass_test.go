package forwardpass

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// testBundle is a database with the INBOX of account "primary" bound, and
// a connection for a pass to write on.
type testBundle struct {
	pool    *pgxpool.Pool
	binding mailstore.Binding
	conn    *pgxpool.Conn
}

// rawMIME is the raw MIME stored at uid of the bundle's binding, in
// UIDVALIDITY 7, as text.
func (b *testBundle) rawMIME(ctx context.Context, t *testing.T, uid uint32) string {
	t.Helper()
	o, found, err := mailstore.ReadOccurrence(ctx, b.pool, b.binding.ID, 7, uid)
	require.NoError(t, err)
	require.True(t, found, "UID %d stored", uid)
	raw, err := mailstore.RawMIME(ctx, b.pool, o.ID)
	require.NoError(t, err)
	require.NotNil(t, raw, "UID %d has content", uid)
	return string(raw)
}

func setup(t *testing.T) (context.Context, *testBundle) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	conn, err := pool.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(conn.Release)
	return ctx, &testBundle{pool: pool, binding: binding, conn: conn}
}

// answerTwiceSession serves UIDs 1..n and answers every body fetch for
// UID twice, as a server may (an unsolicited FETCH beside the solicited
// one).
type answerTwiceSession struct {
	n     uint32
	twice uint32
	// validity is the folder's UIDVALIDITY; 0 means 7.
	validity uint32
}

func (s *answerTwiceSession) Examine(context.Context, string) (imapx.FolderState, error) {
	return imapx.FolderState{Path: "INBOX", UIDValidity: cmp.Or(s.validity, 7), UIDNext: s.n + 1, Exists: s.n}, nil
}

func (s *answerTwiceSession) SearchUIDs(_ context.Context, after uint32, _ time.Time) ([]uint32, error) {
	var out []uint32
	for u := after + 1; u <= s.n; u++ {
		out = append(out, u)
	}
	return out, nil
}

func (s *answerTwiceSession) FetchMetadata(_ context.Context, uids []uint32) ([]imapx.MessageMetadata, error) {
	out := make([]imapx.MessageMetadata, len(uids))
	for i, u := range uids {
		out[i] = imapx.MessageMetadata{UID: u, Size: 100}
	}
	return out, nil
}

// FetchBodies reuses one buffer for every message, as imapx does: a body is
// valid only during fn.
func (s *answerTwiceSession) FetchBodies(_ context.Context, uids []uint32, _ int64, fn func(imapx.Body) error) error {
	var raw []byte
	for _, u := range uids {
		raw = fmt.Appendf(raw[:0], "Subject: message %d\r\n\r\nbody of message %d\r\n", u, u)
		if err := fn(imapx.Body{UID: u, Raw: raw}); err != nil {
			return err
		}
		if u == s.twice {
			if err := fn(imapx.Body{UID: u, Raw: raw}); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *answerTwiceSession) ExistingUIDs(_ context.Context, uids []uint32) ([]uint32, error) {
	return uids, nil
}

// ReconcileMode reports a server without modification sequences.
func (s *answerTwiceSession) ReconcileMode() imapx.ReconcileMode { return imapx.Plain }

// IdentityScheme reports a server that does not name its messages.
func (s *answerTwiceSession) IdentityScheme() imapx.IdentityScheme { return imapx.NoIdentity }

func (s *answerTwiceSession) FetchIdentities(context.Context, []uint32) (map[uint32]imapx.MessageIdentity, error) {
	return nil, nil
}

func (s *answerTwiceSession) Recover(ctx context.Context) (imapx.FolderState, error) {
	return s.Examine(ctx, "")
}

// A second answer for a UID is not written again: on the other lane it
// would wait for the first write's row, which commits only once both
// lanes have answered.
func TestForwardPassIgnoresASecondAnswerForOneUID(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	pool, binding, conn := b.pool, b.binding, b.conn
	second, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer second.Release()

	rep, err := Run(ctx, conn, &answerTwiceSession{n: 5, twice: 2}, binding, Options{
		SecondWriter: second, BatchSize: 10, BatchesPerRun: 1, MaxRawMimeBytes: 1 << 20,
		Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.Equal(t, 5, rep.Stored)
	require.Equal(t, uint32(5), rep.CheckpointUID)
	uids, err := mailstore.StoredUIDs(ctx, pool, binding.ID, 7)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, uids)
}

// A folder recreated on the server is stored again under its new
// UIDVALIDITY, and the old copy stays what is served until the new one is
// walked to its end: then the new one is served and the old one kept. The
// session is scripted because what this decides is the database's; the
// workers' tests recreate a folder in Dovecot.
func TestForwardPassServesANewUIDSpaceOnceItIsComplete(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	pool, binding, conn := b.pool, b.binding, b.conn
	opts := Options{BatchSize: 2, BatchesPerRun: 1, MaxRawMimeBytes: 1 << 20,
		Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000}}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	served := func() map[uint32]int {
		out := map[uint32]int{}
		for _, o := range dbassert.Occurrences(t, pool, "") {
			if o.Served {
				out[o.UIDValidity]++
			}
		}
		return out
	}
	passUntilDone := func(sess Session) []Report {
		var reps []Report
		for {
			rep, err := Run(ctx, conn, sess, binding, opts, logger)
			require.NoError(t, err)
			reps = append(reps, rep)
			if !rep.More {
				return reps
			}
			require.False(t, rep.Scope.Replaced, "a partial pass serves nothing new")
		}
	}

	first := passUntilDone(&answerTwiceSession{n: 5})
	require.Zero(t, first[len(first)-1].Scope)
	require.Equal(t, map[uint32]int{7: 5}, served())

	recreated := &answerTwiceSession{n: 3, validity: 8}
	rep, err := Run(ctx, conn, recreated, binding, opts, logger)
	require.NoError(t, err)
	require.True(t, rep.ProgressReset)
	require.True(t, rep.More)
	require.Equal(t, map[uint32]int{7: 5}, served(), "until the new UID space is complete the old one is served")

	reps := passUntilDone(recreated)
	last := reps[len(reps)-1]
	require.Equal(t, mailstore.ScopeChange{Replaced: true, Invalidated: 5}, last.Scope)
	require.Equal(t, map[uint32]int{8: 3}, served(), "then only the new one")
	kept, err := mailstore.StoredUIDs(ctx, pool, binding.ID, 7)
	require.NoError(t, err)
	require.Len(t, kept, 5, "a UIDVALIDITY change never deletes anything")

	// Another pass changes nothing.
	rep, err = Run(ctx, conn, recreated, binding, opts, logger)
	require.NoError(t, err)
	require.Zero(t, rep.Scope)
}

// countingSession counts the body fetches it answers.
type countingSession struct {
	answerTwiceSession
	fetched int
}

func (s *countingSession) FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error) error {
	s.fetched += len(uids)
	return s.answerTwiceSession.FetchBodies(ctx, uids, maxBytes, fn)
}

// A write group another transaction got in the way of is written again in
// a fresh transaction, without fetching again, up to the commit attempts;
// then the conflict defers the pass. PostgreSQL produces the conflict: a
// trigger fails the first writes of raw MIME as a serialization failure,
// counted by a sequence, which a rolled-back transaction does not undo.
func TestForwardPassWritesAConflictingGroupAgain(t *testing.T) {
	t.Parallel()

	setupConflicts := func(t *testing.T, failures int) (context.Context, *testBundle) {
		t.Helper()
		ctx, b := setup(t)
		dbassert.InjectContentConflicts(t, b.pool, failures)
		return ctx, b
	}
	run := func(ctx context.Context, t *testing.T, b *testBundle, sess Session, attempts int) (Report, error) {
		t.Helper()
		conn, err := b.pool.Acquire(ctx)
		require.NoError(t, err)
		defer conn.Release()
		return Run(ctx, conn, sess, b.binding, Options{
			BatchSize: 10, BatchesPerRun: 1, MaxRawMimeBytes: 1 << 20, CommitAttempts: attempts,
			Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000},
		}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}

	t.Run("WrittenAgainWithoutFetchingAgain", func(t *testing.T) {
		t.Parallel()
		ctx, b := setupConflicts(t, 2)
		sess := &countingSession{answerTwiceSession: answerTwiceSession{n: 5}}
		rep, err := run(ctx, t, b, sess, 3)
		require.NoError(t, err)
		require.Equal(t, 5, rep.Stored)
		require.Equal(t, 5, sess.fetched, "every body was fetched once")
		uids, err := mailstore.StoredUIDs(ctx, b.pool, b.binding.ID, 7)
		require.NoError(t, err)
		require.Equal(t, []uint32{1, 2, 3, 4, 5}, uids)
		// The session reused its buffer: what was written again is each
		// message's own payload, not the last one read.
		for _, u := range uids {
			require.Equal(t, fmt.Sprintf("Subject: message %d\r\n\r\nbody of message %d\r\n", u, u), b.rawMIME(ctx, t, u))
		}
	})

	t.Run("DeferredOnceTheAttemptsAreSpent", func(t *testing.T) {
		t.Parallel()
		ctx, b := setupConflicts(t, 100)
		sess := &countingSession{answerTwiceSession: answerTwiceSession{n: 5}}
		_, err := run(ctx, t, b, sess, 2)
		require.ErrorIs(t, err, mailstore.ErrConcurrencyConflict)
		require.Equal(t, 5, sess.fetched)
		_, has, err := mailstore.ReadCheckpoint(ctx, b.pool, b.binding.ID)
		require.NoError(t, err)
		require.False(t, has, "the checkpoint did not move")
	})
}

// withholdingSession lists UIDs 1..n but never delivers the bodies of
// withheld (the server still lists them) nor of expunged (gone by the time
// their bodies are asked for), and delivers empty as a zero-length
// message. No real server withholds content on demand, so the session is
// scripted; imapx's tests show an empty message arriving from Dovecot.
type withholdingSession struct {
	answerTwiceSession
	withheld, expunged, empty uint32
}

func (s *withholdingSession) FetchBodies(_ context.Context, uids []uint32, _ int64, fn func(imapx.Body) error) error {
	for _, u := range uids {
		var raw []byte
		switch u {
		case s.withheld, s.expunged:
			continue
		case s.empty:
			raw = []byte{}
		default:
			raw = fmt.Appendf(nil, "Subject: message %d\r\n\r\nbody of message %d\r\n", u, u)
		}
		if err := fn(imapx.Body{UID: u, Raw: raw}); err != nil {
			return err
		}
	}
	return nil
}

func (s *withholdingSession) ExistingUIDs(_ context.Context, uids []uint32) ([]uint32, error) {
	var out []uint32
	for _, u := range uids {
		if u != s.expunged {
			out = append(out, u)
		}
	}
	return out, nil
}

// A requested body that never arrives is not a stored message: one that
// left the folder is counted and stepped over, one the server still lists
// stops the checkpoint before it until it has been withheld in
// MaxWithheldPasses passes, and is then recorded as ContentWithheld. An
// empty message is stored as an empty message.
func TestForwardPassDoesNotStepOverWithheldContent(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	pool, binding, conn := b.pool, b.binding, b.conn
	sess := &withholdingSession{answerTwiceSession: answerTwiceSession{n: 8}, withheld: 5, expunged: 3, empty: 2}
	pass := func() (Report, error) {
		return Run(ctx, conn, sess, binding, Options{BatchSize: 10, BatchesPerRun: 1, MaxRawMimeBytes: 1 << 20,
			Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000}},
			slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	availability := func() map[uint32]string {
		out := map[uint32]string{}
		for _, o := range dbassert.Occurrences(t, pool, "") {
			out[o.UID] = o.Availability
		}
		return out
	}

	for i := 1; i < MaxWithheldPasses; i++ {
		rep, err := pass()
		var withheld *ContentWithheldError
		require.ErrorAs(t, err, &withheld, "pass %d", i)
		require.Equal(t, "MailboxContentWithheld", withheld.Identity())
		require.True(t, withheld.RetryLater())
		require.Equal(t, uint32(4), rep.CheckpointUID, "the checkpoint stops before the withheld message")
		cp, _, err := mailstore.ReadCheckpoint(ctx, pool, binding.ID)
		require.NoError(t, err)
		require.Equal(t, uint32(4), cp.LastSeenUID)
		require.NotContains(t, availability(), uint32(5))
		if i == 1 {
			require.Equal(t, 1, rep.ExpungedBeforeFetch)
		}
	}

	rep, err := pass()
	require.NoError(t, err, "after %d passes the message is recorded and the pass moves on", MaxWithheldPasses)
	require.Equal(t, 1, rep.Withheld)
	require.Equal(t, uint32(8), rep.CheckpointUID)
	require.Equal(t, map[uint32]string{
		1: "Available", 2: "Available", 4: "Available", 5: "ContentWithheld", 6: "Available", 7: "Available", 8: "Available",
	}, availability())
	empty, found, err := mailstore.ReadOccurrence(ctx, pool, binding.ID, 7, 2)
	require.NoError(t, err)
	require.True(t, found)
	require.NotNil(t, empty.ContentLength)
	require.Zero(t, *empty.ContentLength, "an empty message is stored, empty")
	require.Zero(t, dbassert.WithheldNotes(t, pool))
}

// stoppingSession closes stop once it has delivered its first body.
type stoppingSession struct {
	answerTwiceSession
	stop chan struct{}
}

func (s *stoppingSession) FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error) error {
	select {
	case <-s.stop:
	default:
		close(s.stop)
	}
	return s.answerTwiceSession.FetchBodies(ctx, uids, maxBytes, fn)
}

// A pass told to stop ends after the batch in flight, with its checkpoint,
// and reports work left, as at its batch bound.
func TestForwardPassStopsAtABatchBoundary(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	pool, binding, conn := b.pool, b.binding, b.conn
	sess := &stoppingSession{answerTwiceSession: answerTwiceSession{n: 30}, stop: make(chan struct{})}
	rep, err := Run(ctx, conn, sess, binding, Options{BatchSize: 10, BatchesPerRun: 3, MaxRawMimeBytes: 1 << 20, Stopping: sess.stop,
		Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000}},
		slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.Equal(t, 1, rep.Batches, "the batch in flight, and no other")
	require.True(t, rep.More)
	require.Equal(t, uint32(10), rep.CheckpointUID)
	cp, _, err := mailstore.ReadCheckpoint(ctx, pool, binding.ID)
	require.NoError(t, err)
	require.Equal(t, uint32(10), cp.LastSeenUID)
}

// With two writer connections the group commits in two transactions; each
// offers exactly the messages it wrote, so an offer is never visible (and
// worked) before the messages it names.
func TestForwardPassOffersEachMessageInTheTransactionThatWroteIt(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	second, err := b.pool.Acquire(ctx)
	require.NoError(t, err)
	defer second.Release()

	var mu sync.Mutex
	var offered []uuid.UUID
	// It runs in the pass's writers, off the test's goroutine: it reports
	// what it finds rather than failing the test.
	offer := func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
		visible := 0
		for _, id := range ids {
			raw, err := mailstore.RawMIME(ctx, tx, id)
			if err != nil {
				return err
			}
			if raw != nil {
				visible++
			}
		}
		if visible != len(ids) {
			return fmt.Errorf("offered %d messages in a transaction that holds %d of them", len(ids), visible)
		}
		mu.Lock()
		defer mu.Unlock()
		offered = append(offered, ids...)
		return nil
	}
	rep, err := Run(ctx, b.conn, &answerTwiceSession{n: 20}, b.binding, Options{
		SecondWriter: second, BatchSize: 20, BatchesPerRun: 1, MaxRawMimeBytes: 1 << 20, Offer: offer,
		Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000},
	}, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.Equal(t, 20, rep.Stored)
	require.Len(t, offered, 20, "every stored message is offered once")
}

// sizedSession serves UIDs 1..n of the sizes size gives, with bodies of
// exactly that size, and records every UID whose body was asked for.
type sizedSession struct {
	answerTwiceSession
	size func(uid uint32) int64

	mu      sync.Mutex
	fetched []uint32
}

func (s *sizedSession) FetchMetadata(_ context.Context, uids []uint32) ([]imapx.MessageMetadata, error) {
	out := make([]imapx.MessageMetadata, len(uids))
	for i, u := range uids {
		out[i] = imapx.MessageMetadata{UID: u, Size: s.size(u)}
	}
	return out, nil
}

func (s *sizedSession) FetchBodies(_ context.Context, uids []uint32, _ int64, fn func(imapx.Body) error) error {
	for _, u := range uids {
		s.mu.Lock()
		s.fetched = append(s.fetched, u)
		s.mu.Unlock()
		head := fmt.Sprintf("Subject: message %d\r\n\r\n", u)
		raw := append([]byte(head), make([]byte, s.size(u)-int64(len(head)))...)
		for i := len(head); i < len(raw); i++ {
			raw[i] = 'x'
		}
		if err := fn(imapx.Body{UID: u, Raw: raw}); err != nil {
			return err
		}
	}
	return nil
}

// TestForwardPassStopsAtItsDownloadAllowance: a pass given less
// allowance than the folder holds asks for the messages, in UID order,
// only while the allowance holds the next one — within a batch as across
// batches and the batches read ahead — and ends before the first it
// cannot hold, with its checkpoint committed below it and its size
// reported. The next pass continues from there, and no message is asked
// for twice.
func TestForwardPassStopsAtItsDownloadAllowance(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	// UID 5 is too large for what the first allowance leaves; UID 6,
	// after it, would fit and must not be asked for either. UID 9 is over
	// the size limit and costs nothing.
	sizes := map[uint32]int64{1: 300, 2: 300, 3: 300, 4: 300, 5: 900, 6: 100, 7: 300, 8: 300, 9: 5000, 10: 300}
	sess := &sizedSession{answerTwiceSession: answerTwiceSession{n: 10}, size: func(u uint32) int64 { return sizes[u] }}
	opts := Options{
		BatchSize: 3, BatchesPerRun: 10, MaxRawMimeBytes: 4096,
		Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000},
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))

	opts.MaxDownloadBytes = 1500
	rep, err := Run(ctx, b.conn, sess, b.binding, opts, logger)
	require.NoError(t, err)
	require.True(t, rep.BudgetReached)
	require.True(t, rep.More)
	require.EqualValues(t, 900, rep.NextMessageBytes)
	require.Equal(t, 4, rep.Stored)
	require.EqualValues(t, 1200, rep.RequestedBytes)
	require.Equal(t, uint32(4), rep.CheckpointUID, "the checkpoint stops below the message left")
	require.Equal(t, []uint32{1, 2, 3, 4}, sess.fetched, "nothing at or after the message left was asked for")
	cp, _, err := mailstore.ReadCheckpoint(ctx, b.pool, b.binding.ID)
	require.NoError(t, err)
	require.Equal(t, uint32(4), cp.LastSeenUID, "committed")

	// An allowance that cannot hold the next message asks for nothing.
	opts.MaxDownloadBytes = 899
	rep, err = Run(ctx, b.conn, sess, b.binding, opts, logger)
	require.NoError(t, err)
	require.True(t, rep.BudgetReached)
	require.Zero(t, rep.Stored)
	require.Equal(t, uint32(4), rep.CheckpointUID)
	require.Len(t, sess.fetched, 4)

	opts.MaxDownloadBytes = 10_000
	rep, err = Run(ctx, b.conn, sess, b.binding, opts, logger)
	require.NoError(t, err)
	require.False(t, rep.BudgetReached)
	require.False(t, rep.More)
	require.Equal(t, 5, rep.Stored)
	require.Equal(t, 1, rep.Oversized)
	require.Equal(t, uint32(10), rep.CheckpointUID)
	require.Equal(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 10}, sess.fetched, "every message asked for once")
	uids, err := mailstore.StoredUIDs(ctx, b.pool, b.binding.ID, 7)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uids)
}
