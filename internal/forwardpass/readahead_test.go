package forwardpass

import (
	"context"
	"errors"
	"io"
	"log/slog"
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
// UID on asked, fails the one that starts at failAt, and records which
// bodies were asked for. The session is scripted because what is decided
// is the pass's ordering of its own calls.
type readAheadSession struct {
	answerTwiceSession
	asked  chan uint32
	failAt uint32
	bodies []uint32
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
	s.bodies = append(s.bodies, uids...)
	return s.answerTwiceSession.FetchBodies(ctx, uids, maxBytes, fn)
}

var readAheadLimits = Limits{
	BatchSize: 5, BatchesPerRun: 10, MaxRawMimeBytes: 1 << 20,
	Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000},
}

// The next batch's metadata is read while a batch commits. When that
// commit fails, the pass ends with the commit's error and nothing of the
// next batch is fetched or stored: the metadata read ahead is dropped.
// The commit fails in its offer, which waits until the read ahead has
// asked for the next batch, so a pass that did not overlap them fails
// with another error.
func TestForwardPassReadsMetadataAheadButWritesNothingPastAFailedCommit(t *testing.T) {
	t.Parallel()
	ctx, b := setup(t)
	sess := &readAheadSession{answerTwiceSession: answerTwiceSession{n: 10}, asked: make(chan uint32, 4)}
	refused := errors.New("commit refused")
	lim := readAheadLimits
	lim.Offer = func(ctx context.Context, _ pgx.Tx, _ []uuid.UUID) error {
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
	rep, err := Run(ctx, b.conn, sess, b.binding, lim, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorIs(t, err, refused)
	require.Zero(t, rep.Stored)
	require.Zero(t, rep.Batches)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, sess.bodies, "no body of the next batch is fetched")
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
	rep, err := Run(ctx, b.conn, sess, b.binding, readAheadLimits, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.ErrorContains(t, err, "metadata fetch failed")
	require.Equal(t, 5, rep.Stored)
	require.Equal(t, 1, rep.Batches)
	require.Equal(t, uint32(5), rep.CheckpointUID)
	require.Equal(t, []uint32{1, 2, 3, 4, 5}, sess.bodies)
	cp, _, err := mailstore.ReadCheckpoint(ctx, b.pool, b.binding.ID)
	require.NoError(t, err)
	require.Equal(t, uint32(5), cp.LastSeenUID)
}
