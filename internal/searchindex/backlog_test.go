package searchindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestVectorBacklog(t *testing.T) {
	t.Parallel()
	const dims = 32

	type testBundle struct {
		ctx     context.Context
		pool    *pgxpool.Pool
		account int64
		folder  int64
		profile int16
	}
	// store writes one message with subject and body in b's folder.
	store := func(t *testing.T, b *testBundle, q searchindex.Batcher, uid uint32, subject, body string) uuid.UUID {
		t.Helper()
		raw := []byte("Subject: " + subject + "\r\nContent-Type: text/plain\r\n\r\n" + body + "\r\n")
		rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
		id, err := searchindex.WriteOccurrence(b.ctx, q, mailstore.Occurrence{AccountID: b.account, FolderID: b.folder,
			UIDValidity: 1, UID: uid, Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw}, &rec)
		require.NoError(t, err)
		return id
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		b := &testBundle{ctx: ctx, pool: dbtest.Pool(t)}
		var err error
		b.account, err = mailstore.EnsureAccount(ctx, b.pool, "primary")
		require.NoError(t, err)
		tx, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		binding, _, _, err := mailstore.CommitBinding(ctx, tx, b.account, "inbox", "INBOX", "/")
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		b.folder = binding.ID
		return b
	}
	ensureProfile := func(t *testing.T, b *testBundle) {
		t.Helper()
		var err error
		b.profile, err = searchindex.EnsureProfile(b.ctx, b.pool, "test-model", dims)
		require.NoError(t, err)
	}
	embed := func(t *testing.T, b *testBundle, ids ...uuid.UUID) {
		t.Helper()
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, b.profile, ids)
		require.NoError(t, err)
		var vs []searchindex.PassageVector
		for _, p := range pending {
			vs = append(vs, searchindex.PassageVector{Passage: p, Vector: embedtest.Embed(p.Text, dims)})
		}
		_, err = searchindex.WriteVectors(b.ctx, b.pool, b.profile, vs)
		require.NoError(t, err)
	}
	awaiting := func(t *testing.T, b *testBundle) int64 {
		t.Helper()
		folders, err := searchindex.AwaitingVectorsByFolder(b.ctx, b.pool, b.profile)
		require.NoError(t, err)
		var byFolder int64
		for _, f := range folders {
			byFolder += f.Awaiting
		}
		profiles, err := searchindex.AwaitingPerProfile(b.ctx, b.pool)
		require.NoError(t, err)
		for _, p := range profiles {
			if p.ProfileID == b.profile {
				require.Equal(t, p.Awaiting, byFolder, "the two counts agree")
				return p.Awaiting
			}
		}
		t.Fatalf("profile %d not listed", b.profile)
		return 0
	}

	t.Run("TheCountFollowsPassagesAndVectors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		crane := store(t, b, b.pool, 1, "Harbour crane inspection", "The inspectors examined the cranes.")
		lunch := store(t, b, b.pool, 2, "Lunch on Friday", "Shall we have lunch at the noodle place?")
		ensureProfile(t, b)
		require.EqualValues(t, 2, awaiting(t, b), "a new profile owes every message stored before it")

		embed(t, b, crane)
		require.EqualValues(t, 1, awaiting(t, b))
		budget := store(t, b, b.pool, 3, "Quarterly budget", "The budget review is attached.")
		require.EqualValues(t, 2, awaiting(t, b), "a message stored later is owed too")
		embed(t, b, lunch, budget)
		require.EqualValues(t, 0, awaiting(t, b))

		// Stored again as it was: nothing changed, nothing is owed.
		store(t, b, b.pool, 2, "Lunch on Friday", "Shall we have lunch at the noodle place?")
		require.EqualValues(t, 0, awaiting(t, b))
		// Its text changed: its new passage is owed a vector.
		store(t, b, b.pool, 2, "Lunch on Friday", "Lunch moves to the dumpling place instead.")
		require.EqualValues(t, 1, awaiting(t, b))

		// A message that is no longer served is not counted.
		_, err := b.pool.Exec(b.ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, lunch)
		require.NoError(t, err)
		require.EqualValues(t, 0, awaiting(t, b))
	})

	t.Run("SettlingNeverRacesAWriter", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ensureProfile(t, b)
		crane := store(t, b, b.pool, 1, "Harbour crane inspection", "The inspectors examined the cranes.")
		embed(t, b, crane)
		require.EqualValues(t, 0, awaiting(t, b))
		// As between an embed job's storing of the vectors and its
		// settling: embedded, still in the backlog.
		_, err := b.pool.Exec(b.ctx, `INSERT INTO vector_backlog (profile_id, stored_email_id) VALUES ($1, $2)`, b.profile, crane)
		require.NoError(t, err)

		// A writer gives the message new text and has not committed; an
		// embed job settling the message meanwhile sees only the old
		// passages, all embedded. It must neither wait for the writer nor
		// take out what the writer's commit will owe.
		writer, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = writer.Rollback(b.ctx) }()
		store(t, b, writer, 1, "Harbour crane inspection", "The cranes failed their inspection.")
		settled := make(chan error, 1)
		go func() { settled <- searchindex.SettleBacklog(b.ctx, b.pool, b.profile, []uuid.UUID{crane}) }()
		select {
		case err := <-settled:
			require.NoError(t, err)
		case <-time.After(10 * time.Second):
			t.Fatal("settling waited for the writer")
		}
		require.NoError(t, writer.Commit(b.ctx))
		require.EqualValues(t, 1, awaiting(t, b), "the new passage is owed its vector")
		embed(t, b, crane)
		require.EqualValues(t, 0, awaiting(t, b))
	})

	t.Run("AMessageAlreadySettledIsOwedAgainWhenItChanges", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ensureProfile(t, b)
		crane := store(t, b, b.pool, 1, "Harbour crane inspection", "The inspectors examined the cranes.")
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, b.profile, []uuid.UUID{crane})
		require.NoError(t, err)

		// The message is rewritten while its old passages are being
		// embedded: the vectors of the old text are not stored, and the
		// message stays owed.
		store(t, b, b.pool, 1, "Harbour crane inspection", "The cranes failed their inspection.")
		var vs []searchindex.PassageVector
		for _, p := range pending {
			vs = append(vs, searchindex.PassageVector{Passage: p, Vector: embedtest.Embed(p.Text, dims)})
		}
		_, err = searchindex.WriteVectors(b.ctx, b.pool, b.profile, vs)
		require.NoError(t, err)
		require.EqualValues(t, 1, awaiting(t, b))
	})

	t.Run("TheWalkAddsWhatTheBacklogMissed", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		ensureProfile(t, b)
		crane := store(t, b, b.pool, 1, "Harbour crane inspection", "The inspectors examined the cranes.")
		// As when its passages were written while the profile was being
		// created: owed, but not in the backlog.
		_, err := b.pool.Exec(b.ctx, `DELETE FROM vector_backlog WHERE stored_email_id = $1`, crane)
		require.NoError(t, err)
		require.EqualValues(t, 0, awaiting(t, b))
		ids, err := searchindex.EmailsAwaitingVectors(b.ctx, b.pool, b.profile, uuid.Nil, 10)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{crane}, ids)
		require.EqualValues(t, 1, awaiting(t, b), "the walk put it back")
	})
}
