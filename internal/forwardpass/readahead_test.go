package forwardpass

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/mimex"
)

// readAheadSession serves UIDs 1..n; it reports each metadata fetch's first
// UID on asked and each body fetch's first UID on bodiesAsked, fails the
// metadata fetch that starts at failAt and, after its first message, the
// body fetch that starts at failBodiesAt, and records each body fetch's
// UIDs. The session is scripted because what is decided is the pass's
// ordering of its own calls.
type readAheadSession struct {
	answerTwiceSession
	asked        chan uint32
	bodiesAsked  chan uint32
	failAt       uint32
	failBodiesAt uint32
	bodies       [][]uint32
}

func (s *readAheadSession) FetchMetadata(ctx context.Context, uids []uint32) ([]imapx.MessageMetadata, error) {
	select {
	case s.asked <- uids[0]:
	default:
	}
	if uids[0] == s.failAt {
		return nil, errors.New("metadata fetch failed")
	}
	return s.answerTwiceSession.FetchMetadata(ctx, uids)
}

func (s *readAheadSession) FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error) error {
	s.bodies = append(s.bodies, uids)
	select {
	case s.bodiesAsked <- uids[0]:
	default:
	}
	if uids[0] == s.failBodiesAt {
		if err := s.answerTwiceSession.FetchBodies(ctx, uids[:1], maxBytes, fn); err != nil {
			return err
		}
		return &imapx.TransportError{Op: "UID FETCH", Err: io.ErrUnexpectedEOF}
	}
	return s.answerTwiceSession.FetchBodies(ctx, uids, maxBytes, fn)
}

var readAheadOptions = Options{
	BatchSize: 5, BatchesPerRun: 10, MaxRawMimeBytes: 1 << 20,
	Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000},
}

// The next batch's metadata is read while a batch commits. When that
// commit fails, the pass ends with the commit's error and nothing of the
// next batch is stored: what was read ahead is dropped.
// The commit fails in its offer, which waits until the read ahead has
// asked for the next batch, so a pass that did not overlap them fails
// with another error.
func TestForwardPassReadsMetadataAheadButWritesNothingPastAFailedCommit(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	sess := &readAheadSession{answerTwiceSession: answerTwiceSession{n: 10}, asked: make(chan uint32, 4)}
	refused := errors.New("commit refused")
	opts := readAheadOptions
	opts.Offer = func(ctx context.Context, _ pgx.Tx, _ []uuid.UUID) error {
		for {
			select {
			case first := <-sess.asked:
				if first == 6 {
					return refused
				}
			case <-time.After(5 * time.Second):
				return errors.New("the next batch's metadata was not read while the batch committed")
			}
		}
	}
	rep, err := Run(ctx, b.conn, sess, b.binding, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorIs(t, err, refused)
	require.Zero(t, rep.Stored)
	require.Zero(t, rep.Batches)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, sess.bodies[0])
	uids, err := mailstore.StoredUIDs(ctx, b.pool, b.binding.ID, 7)
	require.NoError(t, err)
	require.Empty(t, uids)
	_, hasCP, err := mailstore.ReadCheckpoint(ctx, b.pool, b.binding.ID)
	require.NoError(t, err)
	require.False(t, hasCP)
}

// A metadata fetch read ahead that fails is the next batch's failure: the
// batch that committed meanwhile keeps its checkpoint and its counts.
func TestForwardPassReportsAFailedReadAheadAfterTheBatchCommits(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	sess := &readAheadSession{answerTwiceSession: answerTwiceSession{n: 10}, asked: make(chan uint32), failAt: 6}
	rep, err := Run(ctx, b.conn, sess, b.binding, readAheadOptions, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorContains(t, err, "metadata fetch failed")
	require.Equal(t, 5, rep.Stored)
	require.Equal(t, 1, rep.Batches)
	require.Equal(t, uint32(5), rep.CheckpointUID)
	require.Equal(t, [][]uint32{{1, 2, 3, 4, 5}}, sess.bodies, "no content is read ahead without metadata")
	cp, _, err := mailstore.ReadCheckpoint(ctx, b.pool, b.binding.ID)
	require.NoError(t, err)
	require.Equal(t, uint32(5), cp.LastSeenUID)
}

// The next batch's messages are read while a batch commits, and the next
// batch writes what was read without fetching it again. The commit's offer
// waits until that read has started, so a pass that did not overlap them
// fails.
func TestForwardPassReadsContentAheadWhileABatchCommits(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	sess := &readAheadSession{answerTwiceSession: answerTwiceSession{n: 10}, bodiesAsked: make(chan uint32, 4)}
	opts := readAheadOptions
	waited := false
	opts.Offer = func(ctx context.Context, _ pgx.Tx, _ []uuid.UUID) error {
		if waited {
			return nil
		}
		waited = true
		for {
			select {
			case first := <-sess.bodiesAsked:
				if first == 6 {
					return nil
				}
			case <-time.After(5 * time.Second):
				return errors.New("the next batch's content was not read while the batch committed")
			}
		}
	}
	rep, err := Run(ctx, b.conn, sess, b.binding, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.Equal(t, 10, rep.Stored)
	require.Equal(t, uint32(10), rep.CheckpointUID)
	require.Equal(t, [][]uint32{{1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}}, sess.bodies, "what was read ahead is not fetched again")
	uids, err := mailstore.StoredUIDs(ctx, b.pool, b.binding.ID, 7)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uids)
	for _, u := range uids {
		require.Equal(t, fmt.Sprintf("Subject: message %d\r\n\r\nbody of message %d\r\n", u, u), b.rawMIME(ctx, t, u),
			"a message read ahead keeps its own bytes")
	}
}

// However small ReadAheadBytes is, every message passes: one larger than
// the bound is read alone.
func TestForwardPassReadsPastABoundSmallerThanAMessage(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	sess := &readAheadSession{answerTwiceSession: answerTwiceSession{n: 10}}
	opts := readAheadOptions
	opts.ReadAheadBytes = 1
	rep, err := Run(ctx, b.conn, sess, b.binding, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.Equal(t, 10, rep.Stored)
	uids, err := mailstore.StoredUIDs(ctx, b.pool, b.binding.ID, 7)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, uids)
}

// A body fetch that fails part-way is its batch's failure, whether it
// began while the batch before committed or not: nothing of the batch is
// stored, and the batch before keeps its checkpoint.
func TestForwardPassFailsTheBatchWhoseReadFailed(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	sess := &readAheadSession{answerTwiceSession: answerTwiceSession{n: 10}, failBodiesAt: 6}
	rep, err := Run(ctx, b.conn, sess, b.binding, readAheadOptions, slog.New(slog.NewTextHandler(io.Discard, nil)))
	var transport *imapx.TransportError
	require.ErrorAs(t, err, &transport)
	require.Equal(t, 5, rep.Stored)
	require.Equal(t, uint32(5), rep.CheckpointUID)
	uids, err := mailstore.StoredUIDs(ctx, b.pool, b.binding.ID, 7)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, uids)
}

// exclusiveSession is a Session that records whether two of its calls
// ever overlapped: the pass lets one goroutine at a time drive the
// session, whichever goroutine that is.
type exclusiveSession struct {
	Session
	busy    atomic.Int32
	overlap atomic.Bool
}

func (s *exclusiveSession) enter() func() {
	if s.busy.Add(1) > 1 {
		s.overlap.Store(true)
	}
	// Hold the session long enough for a second caller to show itself:
	// longer than a batch's commit takes.
	time.Sleep(20 * time.Millisecond)
	return func() { s.busy.Add(-1) }
}

func (s *exclusiveSession) SearchUIDs(ctx context.Context, after uint32, since time.Time) ([]uint32, error) {
	defer s.enter()()
	return s.Session.SearchUIDs(ctx, after, since)
}

func (s *exclusiveSession) FetchMetadata(ctx context.Context, uids []uint32) ([]imapx.MessageMetadata, error) {
	defer s.enter()()
	return s.Session.FetchMetadata(ctx, uids)
}

func (s *exclusiveSession) FetchBodies(ctx context.Context, uids []uint32, maxBytes int64, fn func(imapx.Body) error) error {
	defer s.enter()()
	return s.Session.FetchBodies(ctx, uids, maxBytes, fn)
}

func (s *exclusiveSession) ExistingUIDs(ctx context.Context, uids []uint32) ([]uint32, error) {
	defer s.enter()()
	return s.Session.ExistingUIDs(ctx, uids)
}

// A message expunged before its body was fetched is asked about (an
// identifier-only search) while the next batch is already being read:
// that read is abandoned first, so the session is never used by two
// goroutines at once, and the next batch is read again and stored.
func TestForwardPassAsksAboutAMissingBodyWithoutSharingTheSession(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	sess := &exclusiveSession{Session: &withholdingSession{answerTwiceSession: answerTwiceSession{n: 12}, expunged: 3}}
	opts := readAheadOptions
	opts.BatchSize = 4
	rep, err := Run(ctx, b.conn, sess, b.binding, opts, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	require.False(t, sess.overlap.Load(), "two calls drove the session at once")
	require.Equal(t, 11, rep.Stored)
	require.Equal(t, 1, rep.ExpungedBeforeFetch)
	require.Equal(t, uint32(12), rep.CheckpointUID)
	uids, err := mailstore.StoredUIDs(ctx, b.pool, b.binding.ID, 7)
	require.NoError(t, err)
	require.Equal(t, []uint32{1, 2, 4, 5, 6, 7, 8, 9, 10, 11, 12}, uids)
}
