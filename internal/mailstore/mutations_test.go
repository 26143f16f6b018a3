package mailstore_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

func TestMutations(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool        *pgxpool.Pool
		inbox, arch mailstore.Binding
		email       uuid.UUID
		now         time.Time
	}
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx := testContext(t)
		pool := dbtest.Pool(t)
		b := &testBundle{pool: pool, now: time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)}
		b.inbox = bind(ctx, t, pool, "a", "INBOX", "INBOX")
		b.arch = bind(ctx, t, pool, "a", "ARCHIVE", "Archive")
		id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{
			AccountID: b.inbox.AccountID, FolderID: b.inbox.ID, UIDValidity: 7, UID: 3,
			Availability: mailstore.ExceededSizeLimit, Size: 1 << 30,
		})
		require.NoError(t, err)
		b.email = id
		return ctx, b
	}
	record := func(ctx context.Context, t *testing.T, b *testBundle, r mailstore.MutationRequest) (mailstore.Mutation, bool, error) {
		t.Helper()
		var (
			m       mailstore.Mutation
			created bool
		)
		err := pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			m, created, err = mailstore.RecordMutation(ctx, tx, r, b.now)
			return err
		})
		return m, created, err
	}
	move := func(b *testBundle, requestID string) mailstore.MutationRequest {
		return mailstore.MutationRequest{EmailID: b.email, Kind: mailstore.MutationRelocate, DestinationFolderID: b.arch.ID, RequestID: requestID}
	}

	t.Run("RecordsTheSourceOccurrenceAndNoMail", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		m, created, err := record(ctx, t, b, move(b, "r1"))
		require.NoError(t, err)
		require.True(t, created)
		require.Equal(t, b.email, m.EmailID)
		require.Equal(t, b.inbox.ID, m.SourceFolderID)
		require.Equal(t, "INBOX", m.SourceAlias)
		require.Equal(t, "ARCHIVE", m.DestinationAlias)
		require.Equal(t, uint32(7), m.SourceUIDValidity)
		require.Equal(t, uint32(3), m.SourceUID)
		require.Equal(t, mailstore.MutationPending, m.State)
		require.Equal(t, mailstore.StageRecorded, m.Stage)
		require.Equal(t, "a", m.AccountKey)
	})

	t.Run("SameRequestTwiceIsOneChange", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		first, created, err := record(ctx, t, b, move(b, "r1"))
		require.NoError(t, err)
		require.True(t, created)
		again, created, err := record(ctx, t, b, move(b, "r1"))
		require.NoError(t, err)
		require.False(t, created)
		require.Equal(t, first.ID, again.ID)
	})

	t.Run("SameRequestConcurrentlyIsOneChange", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		const callers = 6
		ids := make([]uuid.UUID, callers)
		errs := make([]error, callers)
		createdCount := 0
		var mu sync.Mutex
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				m, created, err := record(ctx, t, b, move(b, "same"))
				mu.Lock()
				defer mu.Unlock()
				ids[i], errs[i] = m.ID, err
				if created {
					createdCount++
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			require.NoError(t, err)
		}
		require.Equal(t, 1, createdCount)
		for _, id := range ids {
			require.Equal(t, ids[0], id)
		}
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM mailbox_mutations`).Scan(&n))
		require.Equal(t, 1, n)
	})

	t.Run("RequestIDReusedForAnotherChangeIsRefused", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, _, err := record(ctx, t, b, move(b, "r1"))
		require.NoError(t, err)
		_, _, err = record(ctx, t, b, mailstore.MutationRequest{EmailID: b.email, Kind: mailstore.MutationDelete, RequestID: "r1"})
		require.ErrorIs(t, err, mailstore.ErrRequestIDReused)
	})

	t.Run("TombstonedEmailIsRefused", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		_, err := b.pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, b.email)
		require.NoError(t, err)
		_, _, err = record(ctx, t, b, move(b, "r1"))
		require.ErrorIs(t, err, mailstore.ErrEmailNotServed)
		e, found, err := mailstore.ReadMutableEmail(ctx, b.pool, b.email)
		require.NoError(t, err)
		require.True(t, found)
		require.True(t, e.Tombstoned)
	})

	t.Run("RemovedWithItsEmail", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		m, _, err := record(ctx, t, b, mailstore.MutationRequest{EmailID: b.email, Kind: mailstore.MutationDelete, RequestID: "r1"})
		require.NoError(t, err)
		_, err = b.pool.Exec(ctx, `DELETE FROM stored_emails WHERE id = $1`, b.email)
		require.NoError(t, err)
		_, found, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
		require.NoError(t, err)
		require.False(t, found)
	})

	t.Run("AttemptsAreCountedBeforeEachAttemptAndBounded", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		m, _, err := record(ctx, t, b, mailstore.MutationRequest{EmailID: b.email, Kind: mailstore.MutationMarkRead, RequestID: "r1"})
		require.NoError(t, err)
		attempt := func() (mailstore.Mutation, mailstore.MutationAttempt) {
			var got mailstore.Mutation
			var d mailstore.MutationAttempt
			require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				var err error
				got, d, err = mailstore.BeginMutationAttempt(ctx, tx, m.ID, 2, "30001", b.now)
				return err
			}))
			return got, d
		}
		got, d := attempt()
		require.Equal(t, mailstore.AttemptGo, d)
		require.Equal(t, 1, got.Attempts)
		require.Equal(t, mailstore.MutationConverging, got.State)
		_, d = attempt()
		require.Equal(t, mailstore.AttemptGo, d)
		got, d = attempt()
		require.Equal(t, mailstore.AttemptExhausted, d)
		require.Equal(t, mailstore.MutationDeadLettered, got.State)
		require.Equal(t, "30001", got.FailureCode)
		_, d = attempt()
		require.Equal(t, mailstore.AttemptFinal, d)
	})

	t.Run("CompletingClearsTheFailureCodeDeadLetteringKeepsIt", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		finish := func(requestID string, state mailstore.MutationState, code string) mailstore.Mutation {
			m, _, err := record(ctx, t, b, mailstore.MutationRequest{EmailID: b.email, Kind: mailstore.MutationMarkRead, RequestID: requestID})
			require.NoError(t, err)
			require.NoError(t, mailstore.FailMutation(ctx, b.pool, m.ID, "10001", b.now))
			require.NoError(t, mailstore.FinishMutation(ctx, b.pool, m.ID, state, code, b.now))
			got, _, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
			require.NoError(t, err)
			require.Equal(t, state, got.State)
			return got
		}
		require.Empty(t, finish("done", mailstore.MutationCompleted, "").FailureCode, "a change that ended as asked is not stuck")
		require.Equal(t, "10001", finish("kept", mailstore.MutationDeadLettered, "").FailureCode)
		require.Equal(t, "30001", finish("given-up", mailstore.MutationDeadLettered, "30001").FailureCode)
	})

	t.Run("AdvanceFromAStageNoLongerHeldConflicts", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		m, _, err := record(ctx, t, b, move(b, "r1"))
		require.NoError(t, err)
		advance := func(from mailstore.MutationStage, a mailstore.MutationAdvance) error {
			return pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				return mailstore.AdvanceMutation(ctx, tx, m.ID, from, a, b.now)
			})
		}
		require.NoError(t, advance(mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: mailstore.PathFallback}))
		err = advance(mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: mailstore.PathFallback})
		require.True(t, mailstore.IsConcurrencyConflict(err), "%v", err)
		require.NoError(t, advance(mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: mailstore.StageCopied, PlacedUIDValidity: 9, PlacedUID: 12}))
		got, _, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
		require.NoError(t, err)
		require.Equal(t, mailstore.StageCopied, got.Stage)
		require.Equal(t, mailstore.PathFallback, got.Path)
		require.Equal(t, b.now, got.PlacementIssuedAt.UTC())
		require.Equal(t, uint32(12), got.PlacedUID)
		require.NoError(t, advance(mailstore.StageCopied, mailstore.MutationAdvance{Stage: mailstore.StageCompleted}))
		got, _, err = mailstore.ReadMutation(ctx, b.pool, m.ID)
		require.NoError(t, err)
		require.Equal(t, mailstore.MutationCompleted, got.State)
	})

	t.Run("UnfinishedOldestFirstAndCounted", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		var ids []uuid.UUID
		for i, kind := range []mailstore.MutationKind{mailstore.MutationMarkRead, mailstore.MutationMarkUnread, mailstore.MutationDelete} {
			b.now = b.now.Add(time.Minute)
			m, _, err := record(ctx, t, b, mailstore.MutationRequest{EmailID: b.email, Kind: kind, RequestID: string(rune('a' + i))})
			require.NoError(t, err)
			ids = append(ids, m.ID)
		}
		require.NoError(t, mailstore.FinishMutation(ctx, b.pool, ids[1], mailstore.MutationDeadLettered, "20002", b.now))
		got, err := mailstore.UnfinishedMutations(ctx, b.pool, "a", 10)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{ids[0], ids[2]}, got)
		got, err = mailstore.UnfinishedMutations(ctx, b.pool, "a", 1)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{ids[0]}, got)
		counts, err := mailstore.CountOutstandingMutations(ctx, b.pool)
		require.NoError(t, err)
		require.Len(t, counts, 3)
		listed, err := mailstore.ListMutations(ctx, b.pool, mailstore.MutationFilter{AccountKey: "a", State: mailstore.MutationDeadLettered})
		require.NoError(t, err)
		require.Len(t, listed, 1)
		require.Equal(t, ids[1], listed[0].ID)
	})
}

func TestChangesOfMailFathomsOwn(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool        *pgxpool.Pool
		inbox, arch mailstore.Binding
		email       uuid.UUID
		now         time.Time
	}
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx := testContext(t)
		pool := dbtest.Pool(t)
		b := &testBundle{pool: pool, now: time.Now().Add(-time.Hour)}
		b.inbox = bind(ctx, t, pool, "a", "INBOX", "INBOX")
		b.arch = bind(ctx, t, pool, "a", "ARCHIVE", "Archive")
		id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{
			AccountID: b.inbox.AccountID, FolderID: b.inbox.ID, UIDValidity: 7, UID: 3,
			Availability: mailstore.Available, Size: 1, Raw: []byte("x"),
		})
		require.NoError(t, err)
		b.email = id
		return ctx, b
	}
	// placed records a change whose placement the server answered with
	// COPYUID 9:40 and whose source removal was issued.
	placed := func(ctx context.Context, t *testing.T, b *testBundle, kind mailstore.MutationKind, dest int64) mailstore.Mutation {
		t.Helper()
		var m mailstore.Mutation
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			m, _, err = mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: b.email, Kind: kind, DestinationFolderID: dest, RequestID: string(kind)}, b.now)
			if err != nil {
				return err
			}
			if err := mailstore.AdvanceMutation(ctx, tx, m.ID, mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: mailstore.PathFallback}, b.now); err != nil {
				return err
			}
			return mailstore.AdvanceMutation(ctx, tx, m.ID, mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: mailstore.StageFlagged, PlacedUIDValidity: 9, PlacedUID: 40}, b.now)
		}))
		return m
	}
	gone := func(ctx context.Context, t *testing.T, b *testBundle, d mailstore.Disposition) mailstore.ReconcileResult {
		t.Helper()
		w := mailstore.ReconcileWindow{Entries: []mailstore.WindowEntry{{ID: b.email, UID: 3, FolderID: b.inbox.ID, UIDValidity: 7}}, TakenAt: time.Now()}
		r, err := mailstore.ApplyReconciliation(ctx, b.pool, w, mailstore.ReconcileAnswer{Present: map[uint32]bool{}, Flags: map[uint32][]string{}}, d)
		require.NoError(t, err)
		return r
	}

	t.Run("AnAnswerAboutTheSourceIsNotAppliedToTheCarriedOccurrence", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		placed(ctx, t, b, mailstore.MutationRelocate, b.arch.ID)
		// The source's window reads its occurrence; before it applies its
		// answer, the destination's pass joins the placement and carries
		// the row across. The answer — the source is gone — is about the
		// source, not about the carried row.
		w, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.inbox.ID, 7, 10)
		require.NoError(t, err)
		require.Len(t, w.Entries, 1)
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			joined, err := mailstore.JoinPlacements(ctx, tx, b.arch.ID, 9, []uint32{40}, b.now)
			require.Len(t, joined, 1)
			return err
		}))
		for _, d := range []mailstore.Disposition{mailstore.EraseLocalCopy, mailstore.RetainTombstone} {
			r, err := mailstore.ApplyReconciliation(ctx, b.pool, w, mailstore.ReconcileAnswer{Present: map[uint32]bool{}, Flags: map[uint32][]string{}}, d)
			require.NoError(t, err)
			require.Zero(t, r.Gone(), d)
		}
		var folder, uid int64
		var tombstoned bool
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT mail_folder_id, uid, remote_expunge_observed_at IS NOT NULL FROM stored_emails WHERE id = $1`, b.email).
			Scan(&folder, &uid, &tombstoned))
		require.Equal(t, []int64{b.arch.ID, 40}, []int64{folder, uid})
		require.False(t, tombstoned, "the carried occurrence is served in the destination")
	})

	t.Run("RelocatedSourceLeavingIsNotATombstone", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		m := placed(ctx, t, b, mailstore.MutationRelocate, b.arch.ID)
		for _, d := range []mailstore.Disposition{mailstore.EraseLocalCopy, mailstore.RetainTombstone} {
			r := gone(ctx, t, b, d)
			require.Equal(t, 1, r.LeftByMailFathom)
			require.Zero(t, r.Gone())
			e, found, err := mailstore.ReadMutableEmail(ctx, b.pool, b.email)
			require.NoError(t, err)
			require.True(t, found)
			require.False(t, e.Tombstoned)
		}
		got, _, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
		require.NoError(t, err)
		require.False(t, got.SourceLeftAt.IsZero())
	})

	// unnamed records a relocation the server carried along path without
	// naming the placement, as far as stage.
	unnamed := func(ctx context.Context, t *testing.T, b *testBundle, path mailstore.PlacementPath, stage mailstore.MutationStage) mailstore.Mutation {
		t.Helper()
		var m mailstore.Mutation
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			var err error
			m, _, err = mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: b.email, Kind: mailstore.MutationRelocate,
				DestinationFolderID: b.arch.ID, RequestID: "unnamed"}, b.now)
			if err != nil {
				return err
			}
			err = mailstore.AdvanceMutation(ctx, tx, m.ID, mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: path}, b.now)
			if err != nil || stage == mailstore.StagePlacementIssued {
				return err
			}
			return mailstore.AdvanceMutation(ctx, tx, m.ID, mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: stage}, b.now)
		}))
		got, _, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
		require.NoError(t, err)
		return got
	}
	reason := func(ctx context.Context, t *testing.T, b *testBundle) *string {
		t.Helper()
		var r *string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT remote_expunge_reason FROM stored_emails WHERE id = $1`, b.email).Scan(&r))
		return r
	}

	// A relocation whose placement the server never named can be joined to
	// no discovery: the destination's copy is stored as one, and the
	// source leaving is the relocation completing, so the source row is
	// tombstoned as MailFathom's relocation — under either disposition,
	// since erasing it would erase the relocation's record.
	for _, tc := range []struct {
		name  string
		path  mailstore.PlacementPath
		stage mailstore.MutationStage
		d     mailstore.Disposition
	}{
		{"MoveAnswered", mailstore.PathMove, mailstore.StageCompleted, mailstore.RetainTombstone},
		{"MoveAnsweredErasingAccount", mailstore.PathMove, mailstore.StageCompleted, mailstore.EraseLocalCopy},
		{"MoveUnanswered", mailstore.PathMove, mailstore.StagePlacementIssued, mailstore.RetainTombstone},
		{"CopyConfirmed", mailstore.PathFallback, mailstore.StageCopied, mailstore.EraseLocalCopy},
	} {
		t.Run("UnjoinedRelocationSourceLeavingIsItsTombstone/"+tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, b := setup(t)
			m := unnamed(ctx, t, b, tc.path, tc.stage)
			require.Equal(t, tc.stage != mailstore.StagePlacementIssued, m.Unjoined(), "unjoined once the placement is known to have run")
			r := gone(ctx, t, b, tc.d)
			require.Equal(t, 1, r.LeftByMailFathom)
			require.Equal(t, 1, r.RelocatedUnjoined)
			require.Zero(t, r.Gone(), "not the disposition of mail someone else removed")
			e, found, err := mailstore.ReadMutableEmail(ctx, b.pool, b.email)
			require.NoError(t, err)
			require.True(t, found, "tombstoned, not erased")
			require.True(t, e.Tombstoned, "no longer served")
			require.Equal(t, "RelocatedByMailFathom", *reason(ctx, t, b))
			got, found, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
			require.NoError(t, err)
			require.True(t, found, "the record stays readable")
			require.False(t, got.SourceLeftAt.IsZero())

			// A later window no longer asks about it, and nothing moves
			// back.
			w, err := mailstore.SelectReconcileWindow(ctx, b.pool, b.inbox.ID, 7, 10)
			require.NoError(t, err)
			require.Empty(t, w.Entries)
		})
	}

	t.Run("UnansweredCopyOfARelocationDoesNotAccountForTheSourceLeaving", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		// A COPY leaves the source where it was: its disappearance is
		// someone else's, whatever became of the copy.
		m := unnamed(ctx, t, b, mailstore.PathFallback, mailstore.StagePlacementIssued)
		r := gone(ctx, t, b, mailstore.RetainTombstone)
		require.Zero(t, r.LeftByMailFathom)
		require.Equal(t, 1, r.Tombstoned)
		require.Nil(t, reason(ctx, t, b))
		got, _, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
		require.NoError(t, err)
		require.True(t, got.SourceLeftAt.IsZero())
	})

	t.Run("UnjoinedPlacementsAreCountedOnceCompleted", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		m := unnamed(ctx, t, b, mailstore.PathMove, mailstore.StagePlacementIssued)
		count := func() []mailstore.FolderMutations {
			got, err := mailstore.UnjoinedPlacements(ctx, b.pool)
			require.NoError(t, err)
			return got
		}
		require.Empty(t, count(), "not known to have run")
		require.NoError(t, mailstore.FailMutation(ctx, b.pool, m.ID, "10001", b.now))
		require.NoError(t, mailstore.FinishMutation(ctx, b.pool, m.ID, mailstore.MutationCompleted, "", b.now))
		got, _, err := mailstore.ReadMutation(ctx, b.pool, m.ID)
		require.NoError(t, err)
		require.True(t, got.Unjoined())
		require.Empty(t, got.FailureCode, "a completed change is not stuck, whatever an earlier attempt met")
		require.Equal(t, []mailstore.FolderMutations{{AccountKey: "a", Alias: "INBOX", State: mailstore.MutationCompleted, Count: 1}}, count())
	})

	t.Run("ADisappearanceNoRecordAccountsForIsTombstoned", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		r := gone(ctx, t, b, mailstore.RetainTombstone)
		require.Zero(t, r.LeftByMailFathom)
		require.Equal(t, 1, r.Tombstoned)
	})

	t.Run("PlacementCarriesTheStoredEmailOnce", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		m := placed(ctx, t, b, mailstore.MutationRelocate, b.arch.ID)
		join := func(uids ...uint32) []mailstore.PlacementJoin {
			var out []mailstore.PlacementJoin
			require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
				var err error
				out, err = mailstore.JoinPlacements(ctx, tx, b.arch.ID, 9, uids, time.Now())
				return err
			}))
			return out
		}
		require.Empty(t, join(39, 41), "other UIDs are not the placement")
		got := join(39, 40, 41)
		require.Equal(t, []mailstore.PlacementJoin{{MutationID: m.ID, Kind: mailstore.MutationRelocate, EmailID: b.email, UID: 40}}, got)
		e, found, err := mailstore.ReadMutableEmail(ctx, b.pool, b.email)
		require.NoError(t, err)
		require.True(t, found)
		require.Equal(t, "ARCHIVE", e.Alias)
		require.Equal(t, uint32(9), e.UIDValidity)
		require.Equal(t, uint32(40), e.UID)
		raw, err := mailstore.RawMIME(ctx, b.pool, b.email)
		require.NoError(t, err)
		require.Equal(t, []byte("x"), raw)
		var n int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM stored_emails`).Scan(&n))
		require.Equal(t, 1, n)
		require.Empty(t, join(40), "a placement answers for one discovery only")
	})
}

func TestSeenAttribution(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool   *pgxpool.Pool
		email  uuid.UUID
		folder int64
	}
	setup := func(t *testing.T, flags []string) (context.Context, *testBundle) {
		t.Helper()
		ctx := testContext(t)
		pool := dbtest.Pool(t)
		inbox := bind(ctx, t, pool, "a", "INBOX", "INBOX")
		id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{
			AccountID: inbox.AccountID, FolderID: inbox.ID, UIDValidity: 7, UID: 3, Flags: flags,
			Availability: mailstore.Available, Size: 1, Raw: []byte("x"),
		})
		require.NoError(t, err)
		_, err = pool.Exec(ctx, `UPDATE stored_emails SET remote_flags_observed_at = now() - interval '1 hour' WHERE id = $1`, id)
		require.NoError(t, err)
		return ctx, &testBundle{pool: pool, email: id, folder: inbox.ID}
	}
	// completed records a flag change of MailFathom's own, completed at
	// completedAt.
	completed := func(ctx context.Context, t *testing.T, b *testBundle, kind mailstore.MutationKind, completedAt time.Time) {
		t.Helper()
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			m, _, err := mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: b.email, Kind: kind, RequestID: string(kind)}, completedAt)
			if err != nil {
				return err
			}
			return mailstore.AdvanceMutation(ctx, tx, m.ID, mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StageCompleted}, completedAt)
		}))
	}
	observe := func(ctx context.Context, t *testing.T, b *testBundle, flags []string) mailstore.ReconcileResult {
		t.Helper()
		w := mailstore.ReconcileWindow{Entries: []mailstore.WindowEntry{{ID: b.email, UID: 3, FolderID: b.folder, UIDValidity: 7}}, TakenAt: time.Now()}
		r, err := mailstore.ApplyReconciliation(ctx, b.pool, w, mailstore.ReconcileAnswer{Present: map[uint32]bool{3: true}, Flags: map[uint32][]string{3: flags}}, mailstore.RetainTombstone)
		require.NoError(t, err)
		return r
	}

	t.Run("TheDirectionAskedForIsMailFathomsOwn", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, nil)
		completed(ctx, t, b, mailstore.MutationMarkRead, time.Now().Add(-time.Minute))
		r := observe(ctx, t, b, []string{`\Seen`})
		require.Equal(t, 1, r.SeenByMailFathom)
		require.Equal(t, 1, r.Refreshed, "the snapshot follows the server either way")
		require.Len(t, r.Withheld, 1)
		require.Equal(t, mailstore.MutationMarkRead, r.Withheld[0].Kind)
		// It expires with that observation: the owner clearing the flag
		// afterwards is their own change.
		r = observe(ctx, t, b, []string{})
		require.Zero(t, r.SeenByMailFathom)
	})

	t.Run("TheOppositeDirectionIsNot", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, []string{`\Seen`})
		completed(ctx, t, b, mailstore.MutationMarkRead, time.Now().Add(-time.Minute))
		r := observe(ctx, t, b, []string{})
		require.Zero(t, r.SeenByMailFathom)
		require.Equal(t, 1, r.Refreshed)
	})

	t.Run("AStoreObservedBeforeIsNot", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t, nil)
		completed(ctx, t, b, mailstore.MutationMarkRead, time.Now().Add(-2*time.Hour))
		r := observe(ctx, t, b, []string{`\Seen`})
		require.Zero(t, r.SeenByMailFathom, "the last observation already postdates the store")
	})
}
