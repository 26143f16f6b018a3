package searchindex_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestVectors(t *testing.T) {
	t.Parallel()
	const dims = 64

	type testBundle struct {
		ctx     context.Context
		pool    *pgxpool.Pool
		profile int16
		ids     map[string]uuid.UUID
	}
	// setup stores three messages and embeds none of them.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "inbox", "INBOX", "/")
		require.NoError(t, err)
		b := &testBundle{ctx: ctx, pool: pool, ids: map[string]uuid.UUID{}}
		for i, m := range []struct{ name, subject, body string }{
			{"crane", "Harbour crane inspection", "The inspectors examined the cranes at the harbour on Monday."},
			{"lunch", "Lunch on Friday", "Shall we have lunch at the noodle place?"},
			{"budget", "Quarterly budget", "The budget review for the quarter is attached."},
		} {
			raw := []byte("Subject: " + m.subject + "\r\nContent-Type: text/plain\r\n\r\n" + m.body + "\r\n")
			rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
			o := mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID, UIDValidity: 1, UID: uint32(i + 1),
				Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw}
			id, err := searchindex.WriteOccurrence(ctx, tx, o, &rec)
			require.NoError(t, err)
			b.ids[m.name] = id
		}
		require.NoError(t, tx.Commit(ctx))
		b.profile, err = searchindex.EnsureProfile(ctx, pool, "test-model", dims)
		require.NoError(t, err)
		again, err := searchindex.EnsureProfile(ctx, pool, "test-model", dims)
		require.NoError(t, err)
		require.Equal(t, b.profile, again)
		return b
	}
	embedAll := func(t *testing.T, b *testBundle, profile int16, ids ...uuid.UUID) int {
		t.Helper()
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, profile, ids)
		require.NoError(t, err)
		var vs []searchindex.PassageVector
		for _, p := range pending {
			vs = append(vs, searchindex.PassageVector{Passage: p, Vector: embedtest.Embed(p.Text, dims)})
		}
		n, err := searchindex.WriteVectors(b.ctx, b.pool, profile, vs)
		require.NoError(t, err)
		return n
	}
	all := func(b *testBundle) []uuid.UUID {
		return []uuid.UUID{b.ids["crane"], b.ids["lunch"], b.ids["budget"]}
	}
	search := func(t *testing.T, b *testBundle, text string) []searchindex.SemanticHit {
		t.Helper()
		hits, err := searchindex.SemanticSearch(b.ctx, b.pool, searchindex.SemanticQuery{
			Profile: b.profile, Vector: embedtest.Embed(text, dims), Accounts: []string{"primary"}, Limit: 10})
		require.NoError(t, err)
		return hits
	}

	t.Run("EmbeddedPassagesAreFoundByMeaning", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		awaiting, err := searchindex.EmailsAwaitingVectors(b.ctx, b.pool, b.profile, uuid.Nil, 10)
		require.NoError(t, err)
		require.Len(t, awaiting, 3)
		require.Equal(t, 6, embedAll(t, b, b.profile, all(b)...), "a subject and a body passage each")
		require.Zero(t, embedAll(t, b, b.profile, all(b)...), "nothing awaits any more")
		awaiting, err = searchindex.EmailsAwaitingVectors(b.ctx, b.pool, b.profile, uuid.Nil, 10)
		require.NoError(t, err)
		require.Empty(t, awaiting)

		hits := search(t, b, "crane inspectors")
		require.NotEmpty(t, hits)
		require.Equal(t, b.ids["crane"], hits[0].StoredEmailID)
		require.Equal(t, "primary", hits[0].Account)
		require.Equal(t, "inbox", hits[0].Alias)
		require.Equal(t, "Harbour crane inspection", hits[0].Subject)

		exact, err := searchindex.ExactSemanticSearch(b.ctx, b.pool, searchindex.SemanticQuery{
			Profile: b.profile, Vector: embedtest.Embed("crane inspectors", dims), Accounts: []string{"primary"}, Limit: 10})
		require.NoError(t, err)
		require.Equal(t, hits[0].StoredEmailID, exact[0].StoredEmailID)
		require.Equal(t, hits[0].Passage, exact[0].Passage)
		require.InDelta(t, exact[0].Score, hits[0].Score, 1e-6)

		none, err := searchindex.SemanticSearch(b.ctx, b.pool, searchindex.SemanticQuery{
			Profile: b.profile, Vector: embedtest.Embed("crane", dims), Accounts: []string{"other"}})
		require.NoError(t, err)
		require.Empty(t, none, "another account's mail is not served")
	})

	t.Run("TombstonedMailIsNeverFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		embedAll(t, b, b.profile, all(b)...)
		_, err := b.pool.Exec(b.ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, b.ids["crane"])
		require.NoError(t, err)
		for _, h := range search(t, b, "crane inspectors harbour") {
			require.NotEqual(t, b.ids["crane"], h.StoredEmailID)
		}
	})

	// A message offered before it is served — of a UID space its folder
	// serves once it has been walked to its end, or whose occurrence left
	// while another is yet to be stored — is embedded all the same, and a
	// walk offers it; one tombstoned that nothing serves is not walked.
	t.Run("AMessageNotYetServedAwaitsItsVectors", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.pool.Exec(b.ctx, `UPDATE mail_folders SET served_uid_validity = 7`)
		require.NoError(t, err)
		_, err = b.pool.Exec(b.ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, b.ids["crane"])
		require.NoError(t, err)
		var served int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM served_stored_emails`).Scan(&served))
		require.Zero(t, served)

		awaiting, err := searchindex.EmailsAwaitingVectors(b.ctx, b.pool, b.profile, uuid.Nil, 10)
		require.NoError(t, err)
		require.ElementsMatch(t, []uuid.UUID{b.ids["lunch"], b.ids["budget"]}, awaiting)
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, b.profile, all(b))
		require.NoError(t, err)
		require.Len(t, pending, 6, "what an embed job was offered is embedded, served yet or not")
	})

	t.Run("ProfilesAreKeptApart", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		embedAll(t, b, b.profile, all(b)...)
		other, err := searchindex.EnsureProfile(b.ctx, b.pool, "another-model", dims)
		require.NoError(t, err)
		require.NotEqual(t, b.profile, other)
		backlog, err := searchindex.AwaitingPerProfile(b.ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, []searchindex.ProfileBacklog{
			{ProfileID: b.profile, Model: "test-model", Dimensions: dims, Awaiting: 0},
			{ProfileID: other, Model: "another-model", Dimensions: dims, Awaiting: 3},
		}, backlog)
		hits, err := searchindex.SemanticSearch(b.ctx, b.pool, searchindex.SemanticQuery{
			Profile: other, Vector: embedtest.Embed("crane", dims), Accounts: []string{"primary"}})
		require.NoError(t, err)
		require.Empty(t, hits, "another profile's vectors are never compared")
	})

	t.Run("AProfileCreatedByTwoAtOnceIsOne", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// The first creation is held open, so the second one's insert
		// waits on it and then finds the key taken.
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		defer func() { _ = tx.Rollback(b.ctx) }()
		first, err := searchindex.EnsureProfile(b.ctx, tx, "raced-model", dims)
		require.NoError(t, err)
		type answer struct {
			id  int16
			err error
		}
		second := make(chan answer, 1)
		go func() {
			id, err := searchindex.EnsureProfile(b.ctx, b.pool, "raced-model", dims)
			second <- answer{id, err}
		}()
		poll.UntilTrue(t, 10*time.Second, "the second creation waits on the first", func() bool {
			var waiting int
			err := b.pool.QueryRow(b.ctx, `SELECT count(*) FROM pg_stat_activity
				WHERE wait_event_type = 'Lock' AND query LIKE '%INSERT INTO embedding_profiles%'`).Scan(&waiting)
			return err == nil && waiting == 1
		})
		require.NoError(t, tx.Commit(b.ctx))
		got := <-second
		require.NoError(t, got.err)
		require.Equal(t, first, got.id)
	})

	t.Run("TheFirstAnsweredModelIsRecordedAndNeverChanged", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		model, err := searchindex.AnsweredModel(b.ctx, b.pool, b.profile)
		require.NoError(t, err)
		require.Empty(t, model, "none recorded before an answer names one")
		recorded, err := searchindex.RecordAnsweredModel(b.ctx, b.pool, b.profile, "served-model")
		require.NoError(t, err)
		require.Equal(t, "served-model", recorded)
		recorded, err = searchindex.RecordAnsweredModel(b.ctx, b.pool, b.profile, "another-model")
		require.NoError(t, err)
		require.Equal(t, "served-model", recorded, "a recorded model is kept")
		profiles, err := searchindex.Profiles(b.ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, []searchindex.Profile{{ID: b.profile, Model: "test-model", Dimensions: dims, AnsweredModel: "served-model"}}, profiles)

		// Recordings that race for a fresh profile agree on one model.
		fresh, err := searchindex.EnsureProfile(b.ctx, b.pool, "fresh-model", dims)
		require.NoError(t, err)
		answers := make(chan string, 8)
		for i := range cap(answers) {
			go func() {
				recorded, err := searchindex.RecordAnsweredModel(b.ctx, b.pool, fresh, fmt.Sprintf("model-%d", i))
				if err != nil {
					recorded = err.Error()
				}
				answers <- recorded
			}()
		}
		first := <-answers
		require.Regexp(t, `^model-\d$`, first)
		for range cap(answers) - 1 {
			require.Equal(t, first, <-answers)
		}
	})

	t.Run("AVectorOfRewrittenTextIsNotStored", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, b.profile, []uuid.UUID{b.ids["lunch"]})
		require.NoError(t, err)
		require.NotEmpty(t, pending)
		stale := pending[0]
		stale.Text = "what the passage said before it was rewritten"
		n, err := searchindex.WriteVectors(b.ctx, b.pool, b.profile, []searchindex.PassageVector{{Passage: stale, Vector: embedtest.Embed(stale.Text, dims)}})
		require.NoError(t, err)
		require.Zero(t, n)
	})

	// refuse records the refusal of id's body passage (ordinal 1) and
	// returns it.
	refuse := func(t *testing.T, b *testBundle, id uuid.UUID, status int) searchindex.PendingPassage {
		t.Helper()
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, b.profile, []uuid.UUID{id})
		require.NoError(t, err)
		require.Len(t, pending, 2)
		body := pending[1]
		n, err := searchindex.RecordRefusals(b.ctx, b.pool, b.profile, []searchindex.PassageRefusal{{Passage: body, Status: status}})
		require.NoError(t, err)
		require.Equal(t, 1, n)
		return body
	}
	refusedIn := func(t *testing.T, b *testBundle) []searchindex.FolderRefusals {
		t.Helper()
		rs, err := searchindex.RefusedPassagesByFolder(b.ctx, b.pool, b.profile)
		require.NoError(t, err)
		return rs
	}

	t.Run("ARefusedPassageNoLongerAwaits", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		body := refuse(t, b, b.ids["crane"], 413)
		require.Equal(t, 5, embedAll(t, b, b.profile, all(b)...), "every passage but the refused one")
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, b.profile, all(b))
		require.NoError(t, err)
		require.Empty(t, pending)
		awaiting, err := searchindex.EmailsAwaitingVectors(b.ctx, b.pool, b.profile, uuid.Nil, 10)
		require.NoError(t, err)
		require.Empty(t, awaiting, "the backfill does not offer the message again")
		byFolder, err := searchindex.AwaitingVectorsByFolder(b.ctx, b.pool, b.profile)
		require.NoError(t, err)
		require.Empty(t, byFolder)
		backlog, err := searchindex.AwaitingPerProfile(b.ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, []searchindex.ProfileBacklog{{ProfileID: b.profile, Model: "test-model", Dimensions: dims, Awaiting: 0, Refused: 1}}, backlog)
		require.Equal(t, []searchindex.FolderRefusals{{AccountKey: "primary", Alias: "inbox", Refused: 1}}, refusedIn(t, b))
		var status int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT status FROM passage_refusals WHERE stored_email_id = $1 AND ordinal = $2`,
			body.StoredEmailID, body.Ordinal).Scan(&status))
		require.Equal(t, 413, status)

		n, err := searchindex.RecordRefusals(b.ctx, b.pool, b.profile, []searchindex.PassageRefusal{{Passage: body, Status: 400}})
		require.NoError(t, err)
		require.Zero(t, n, "a passage is refused once")
		stale := body
		stale.Text = "what the passage said before it was rewritten"
		n, err = searchindex.RecordRefusals(b.ctx, b.pool, b.profile, []searchindex.PassageRefusal{{Passage: stale, Status: 400}})
		require.NoError(t, err)
		require.Zero(t, n, "a refusal of text the passage no longer holds is not recorded")

		_, err = b.pool.Exec(b.ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, b.ids["crane"])
		require.NoError(t, err)
		require.Empty(t, refusedIn(t, b), "a message no longer served counts no refusal")
	})

	t.Run("ARefusalGoesWithTheTextRefused", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := b.ids["crane"]
		refuse(t, b, id, 400)
		rewrite := func(body string) {
			t.Helper()
			raw := []byte("Subject: Harbour crane inspection\r\nContent-Type: text/plain\r\n\r\n" + body + "\r\n")
			rec := searchindex.Extract(id, raw, mimex.DefaultLimits())
			require.NoError(t, searchindex.Write(b.ctx, b.pool, rec))
		}
		rewrite("The inspectors examined the cranes at the harbour on Monday.")
		require.Len(t, refusedIn(t, b), 1, "the same text keeps its refusal")

		rewrite("The inspectors found the winches of both cranes worn.")
		require.Empty(t, refusedIn(t, b))
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, b.profile, []uuid.UUID{id})
		require.NoError(t, err)
		require.Len(t, pending, 2, "the rewritten passage awaits a vector again")
		require.Equal(t, "The inspectors found the winches of both cranes worn.", pending[1].Text)

		// As an embed job stores them: the vectors, then the refusals. The
		// message owes nothing more and leaves the backlog; the two others
		// still await.
		_, err = searchindex.WriteVectors(b.ctx, b.pool, b.profile, []searchindex.PassageVector{
			{Passage: pending[0], Vector: embedtest.Embed(pending[0].Text, dims)}})
		require.NoError(t, err)
		_, err = searchindex.RecordRefusals(b.ctx, b.pool, b.profile, []searchindex.PassageRefusal{{Passage: pending[1], Status: 422}})
		require.NoError(t, err)
		backlog, err := searchindex.AwaitingPerProfile(b.ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, []searchindex.ProfileBacklog{{ProfileID: b.profile, Model: "test-model", Dimensions: dims, Awaiting: 2, Refused: 1}}, backlog)

		require.NoError(t, searchindex.DropProfile(b.ctx, b.pool, b.profile))
		var n int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM passage_refusals`).Scan(&n))
		require.Zero(t, n, "refusals go with their profile")
	})

	t.Run("VectorsGoWithTheirMessage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		embedAll(t, b, b.profile, all(b)...)
		_, err := b.pool.Exec(b.ctx, `DELETE FROM stored_emails WHERE id = $1`, b.ids["budget"])
		require.NoError(t, err)
		var n int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM passage_vectors WHERE stored_email_id = $1`, b.ids["budget"]).Scan(&n))
		require.Zero(t, n)
	})
}
