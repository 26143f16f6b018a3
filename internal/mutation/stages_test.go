package mutation_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestUnansweredMoveSettles: a MOVE whose answer was never read is settled
// from what synchronization observes and nothing else — never issued again
// (the stages never even opens a write connection for it). Reconciliation
// seeing its source leave records that, and the next convergence completes
// it: the record then says it ran, with no failure left on it, and
// unjoined, since the server's answer naming the placement was the one
// lost; the source is tombstoned as MailFathom's relocation. A source still
// there is given up on once UnknownMutationOutcomeGrace has passed on the
// stages's clock, and not before.
func TestUnansweredMoveSettles(t *testing.T) {
	t.Parallel()
	const grace = 6 * time.Hour

	type testBundle struct {
		pool   *pgxpool.Pool
		stages *mutation.Stages
		clock  *atomic.Pointer[time.Time]
		opened *atomic.Int32
		email  uuid.UUID
		inbox  int64
		move   mailstore.Mutation
		issued time.Time
	}
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		b := &testBundle{pool: pool, clock: &atomic.Pointer[time.Time]{}, opened: &atomic.Int32{}}
		b.issued = time.Now().Add(-time.Minute).Truncate(time.Microsecond)
		b.clock.Store(new(b.issued))
		cfg, err := config.Load(nil)
		require.NoError(t, err)
		reg, err := outbound.NewRegistry(cfg.Resilience, nil, nil)
		require.NoError(t, err)
		conns, err := mutation.NewConnections(mutation.ConnectionsConfig{Pool: pool, Registry: reg,
			Open: func(context.Context, string) (*imapx.WriteConnection, error) {
				b.opened.Add(1)
				return nil, errors.New("no write connection is opened to settle a placement")
			}})
		require.NoError(t, err)
		t.Cleanup(conns.Close)
		b.stages, err = mutation.NewStages(mutation.StagesConfig{Pool: pool, Connections: conns, UnknownOutcomeGrace: grace,
			Now: func() time.Time { return *b.clock.Load() },
			Next: func(context.Context, pgx.Tx, mailstore.Mutation) error {
				return errors.New("a settled placement schedules no stage")
			}})
		require.NoError(t, err)

		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		var inbox, archive mailstore.Binding
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			if inbox, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/"); err != nil {
				return err
			}
			archive, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "ARCHIVE", "Archive", "/")
			return err
		}))
		b.email, err = mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID, UIDValidity: 7, UID: 3,
			Size: 1, Raw: []byte("x"), Availability: mailstore.Available})
		require.NoError(t, err)
		b.inbox = inbox.ID
		// What the stages records of a MOVE whose answer never came: the
		// placement issued on the Move path, and its unknown outcome.
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			b.move, _, err = mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: b.email, Kind: mailstore.MutationRelocate,
				DestinationFolderID: archive.ID, RequestID: "lost-answer"}, b.issued)
			if err != nil {
				return err
			}
			if _, _, err := mailstore.BeginMutationAttempt(ctx, tx, b.move.ID, 5, mutation.CodeAttemptsExhausted, b.issued); err != nil {
				return err
			}
			return mailstore.AdvanceMutation(ctx, tx, b.move.ID, mailstore.StageRecorded,
				mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: mailstore.PathMove}, b.issued)
		}))
		require.NoError(t, mailstore.FailMutation(ctx, pool, b.move.ID, mutation.CodeUnknownOutcome, b.issued))
		return ctx, b
	}
	// window asks reconciliation's question about the source and applies
	// the answer: present, or gone.
	window := func(ctx context.Context, t *testing.T, b *testBundle, present bool) mailstore.ReconcileResult {
		t.Helper()
		w := mailstore.ReconcileWindow{Entries: []mailstore.WindowEntry{{ID: b.email, UID: 3, FolderID: b.inbox, UIDValidity: 7}}, TakenAt: time.Now()}
		r, err := mailstore.ApplyReconciliation(ctx, b.pool, w, mailstore.ReconcileAnswer{Present: map[uint32]bool{3: present}}, mailstore.RetainTombstone)
		require.NoError(t, err)
		return r
	}
	converge := func(ctx context.Context, t *testing.T, b *testBundle) mailstore.Mutation {
		t.Helper()
		m, err := b.stages.Step(ctx, b.move.ID, true)
		require.NoError(t, err)
		return m
	}

	t.Run("SourceLeftCompletesIt", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.Equal(t, mailstore.MutationConverging, converge(ctx, t, b).State, "nothing observed yet")

		r := window(ctx, t, b, false)
		require.Equal(t, 1, r.LeftByMailFathom)
		got, _, err := mailstore.ReadMutation(ctx, b.pool, b.move.ID)
		require.NoError(t, err)
		require.False(t, got.SourceLeftAt.IsZero(), "reconciliation records the source leaving")
		e, _, err := mailstore.ReadMutableEmail(ctx, b.pool, b.email)
		require.NoError(t, err)
		require.True(t, e.Tombstoned, "no COPYUID can carry the row across: the destination's copy is the one served")

		b.clock.Store(new(b.issued.Add(time.Hour)))
		got = converge(ctx, t, b)
		require.Equal(t, mailstore.MutationCompleted, got.State)
		require.Empty(t, got.FailureCode, "it ran: the unknown outcome is known now")
		require.True(t, got.Unjoined())
		require.Equal(t, "completed, unjoined", mutation.ViewOf(got).Summary)
		require.Zero(t, b.opened.Load(), "nothing was issued again")
	})

	t.Run("SourceStillThereIsGivenUpOnAfterTheGrace", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		r := window(ctx, t, b, true)
		require.Zero(t, r.LeftByMailFathom)

		b.clock.Store(new(b.issued.Add(grace - time.Second)))
		got := converge(ctx, t, b)
		require.Equal(t, mailstore.MutationConverging, got.State, "within the grace it may still be settled")
		require.Equal(t, mutation.CodeUnknownOutcome, got.FailureCode)

		b.clock.Store(new(b.issued.Add(grace)))
		got = converge(ctx, t, b)
		require.Equal(t, mailstore.MutationDeadLettered, got.State)
		require.Equal(t, mutation.CodeUnknownOutcome, got.FailureCode)
		require.False(t, got.Unjoined())
		require.Equal(t, "dead-lettered", mutation.ViewOf(got).Summary)
		e, _, err := mailstore.ReadMutableEmail(ctx, b.pool, b.email)
		require.NoError(t, err)
		require.False(t, e.Tombstoned, "the message is still where it was")
		require.Zero(t, b.opened.Load(), "nothing was issued again")
	})
}
