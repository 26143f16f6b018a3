package forwardpass

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// answerTwiceSession serves UIDs 1..n and answers every body fetch for
// UID twice, as a server may (an unsolicited FETCH beside the solicited
// one).
type answerTwiceSession struct {
	n     uint32
	twice uint32
}

func (s *answerTwiceSession) Examine(context.Context, string) (imapx.FolderState, error) {
	return imapx.FolderState{Path: "INBOX", UIDValidity: 7, UIDNext: s.n + 1, Exists: s.n}, nil
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

func (s *answerTwiceSession) FetchBodies(_ context.Context, uids []uint32, _ int64, fn func(imapx.Body) error) error {
	for _, u := range uids {
		raw := fmt.Appendf(nil, "Subject: message %d\r\n\r\nbody of message %d\r\n", u, u)
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

func (s *answerTwiceSession) Recover(ctx context.Context) (imapx.FolderState, error) {
	return s.Examine(ctx, "")
}

// A second answer for a UID is not written again: on the other lane it
// would wait for the first write's row, which commits only once both
// lanes have answered.
func TestForwardPassIgnoresASecondAnswerForOneUID(t *testing.T) {
	t.Parallel()
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
	defer conn.Release()
	second, err := pool.Acquire(ctx)
	require.NoError(t, err)
	defer second.Release()

	rep, err := Run(ctx, conn, &answerTwiceSession{n: 5, twice: 2}, binding, Limits{
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
