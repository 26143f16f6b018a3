package workers_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
)

// TestChangeAfterTheWriteConnectionEnded: the account's write connection
// is kept between changes, and the server may close it meanwhile (here
// Dovecot restarts: BYE, then the close). The next change is carried on a
// fresh connection at its first attempt, whatever the server offers; a
// placement none of whose bytes was written is issued again at once; and
// one whose bytes were written and whose answer was lost is still an
// unknown outcome that is never issued again.
func TestChangeAfterTheWriteConnectionEnded(t *testing.T) {
	t.Parallel()

	for name, opts := range map[string][]dovecot.Option{
		"WithMove":    nil,
		"WithoutMove": {dovecot.WithCapability(capsWithoutMove)},
	} {
		t.Run("ClosedByTheServerBetweenTwoMoves/"+name, func(t *testing.T) {
			t.Parallel()
			cutter := &answerCutter{} // not armed: it only counts placements
			srv := dovecot.Start(t, opts...)
			b := setupMutationsOn(t, srv, cutter.open(srv))
			first := b.request(t, b.uids[0], "move", "archive")
			b.waitIdle(t)
			require.Equal(t, mailstore.MutationCompleted, b.mutation(t, first.ID).State)

			srv.Restart()
			second := b.request(t, b.uids[1], "move", "archive")
			b.waitIdle(t)
			got := b.mutation(t, second.ID)
			require.Equal(t, mailstore.MutationCompleted, got.State, "stage %s, failure code %q", got.Stage, got.FailureCode)
			require.Equal(t, 1, got.Attempts, "carried at its first attempt")
			if name == "WithMove" {
				require.Equal(t, mailstore.PathMove, got.Path, "the server's MOVE was seen on the fresh connection")
			} else {
				require.Equal(t, mailstore.PathFallback, got.Path)
			}
			require.Equal(t, 2, cutter.placements(), "one placement per move, none into the closed connection")
			require.NotContains(t, b.user.UIDs("INBOX"), b.uids[1])
			require.Len(t, b.user.UIDs("Filed"), 2)
		})
	}

	t.Run("MoveNotWrittenIsIssuedAgain", func(t *testing.T) {
		t.Parallel()
		cutter := &answerCutter{}
		srv := dovecot.Start(t)
		b := setupMutationsOn(t, srv, cutter.open(srv))
		// The connection breaks as the MOVE goes out, before a byte of it
		// is written: the server never saw it.
		cutter.arm(true)
		move := b.request(t, b.uids[0], "move", "archive")
		b.waitIdle(t)
		got := b.mutation(t, move.ID)
		require.Equal(t, mailstore.MutationCompleted, got.State, "stage %s, failure code %q", got.Stage, got.FailureCode)
		require.Empty(t, got.FailureCode)
		require.Equal(t, 1, got.Attempts, "issued again within the attempt, on a fresh connection")
		require.Equal(t, 2, cutter.placements(), "the broken write and the one that carried it")
		require.NotContains(t, b.user.UIDs("INBOX"), b.uids[0])
		require.Len(t, b.user.UIDs("Filed"), 1)
	})

	t.Run("MoveWrittenAndItsAnswerLostIsNeverReissued", func(t *testing.T) {
		t.Parallel()
		cutter := &answerCutter{}
		srv := dovecot.Start(t)
		b := setupMutationsOn(t, srv, cutter.open(srv))
		first := b.request(t, b.uids[0], "move", "archive")
		b.waitIdle(t)
		require.Equal(t, mailstore.MutationCompleted, b.mutation(t, first.ID).State)

		// The server closes the kept connection; the next MOVE goes out on
		// a fresh one, reaches the server, and its answer is lost.
		srv.Restart()
		cutter.arm(false)
		second := b.request(t, b.uids[1], "move", "archive")
		b.waitIdle(t)
		got := b.mutation(t, second.ID)
		require.Equal(t, mailstore.StagePlacementIssued, got.Stage)
		require.Equal(t, mutation.CodeUnknownOutcome, got.FailureCode)
		require.Equal(t, 2, cutter.placements())
		require.NotContains(t, b.user.UIDs("INBOX"), b.uids[1], "the server carried it out")
		require.Len(t, b.user.UIDs("Filed"), 2)

		b.runAgain(t)
		b.runAgain(t)
		require.Equal(t, 2, cutter.placements(), "a placement whose answer was lost was issued again")
		got = b.mutation(t, second.ID)
		// MOVE took the source with it: synchronization saw it leave.
		require.Equal(t, mailstore.MutationCompleted, got.State, "failure code %q", got.FailureCode)
		require.False(t, got.SourceLeftAt.IsZero())
		require.Len(t, b.user.UIDs("Filed"), 2, "moved once")
	})
}
