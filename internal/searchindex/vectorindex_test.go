package searchindex_test

import (
	"context"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/vectortest"
)

func TestVectorIndex(t *testing.T) {
	t.Parallel()
	const dims, perEmail = 64, 3

	type testBundle struct {
		ctx    context.Context
		pool   *pgxpool.Pool
		ix     *searchindex.VectorIndex
		gen    *vectortest.Generator
		seeded vectortest.Seeded
	}
	// setup stores emails messages of three passages each, 80 % in
	// primary's INBOX and 20 % in its Archive, one a minute from
	// 2020-01-01, clustered around 40 topics, all pending.
	setup := func(t *testing.T, emails int) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		b := &testBundle{ctx: ctx, pool: dbtest.Pool(t), ix: searchindex.NewVectorIndex(), gen: vectortest.NewGenerator(40, 0, dims, 7)}
		b.seeded = vectortest.Seed(t, ctx, b.pool, vectortest.Layout{Emails: emails, PerEmail: perEmail, Seed: 7,
			Folders: []vectortest.Folder{{Account: "primary", Alias: "INBOX", Share: 0.8}, {Account: "primary", Alias: "Archive", Share: 0.2}}},
			b.gen.Passage)
		return b
	}
	query := func(b *testBundle, v []float32) searchindex.SemanticQuery {
		return searchindex.SemanticQuery{Profile: b.seeded.Profile, Vector: v, Accounts: []string{"primary"}, Limit: 10, Index: b.ix}
	}
	ids := func(hits []searchindex.SemanticHit) []uuid.UUID {
		out := []uuid.UUID{}
		for _, h := range hits {
			out = append(out, h.StoredEmailID)
		}
		return out
	}
	// recall is the share of the exact scan's hits the search returns
	// too, over queries fresh queries.
	recall := func(t *testing.T, b *testBundle, queries int, narrow func(*searchindex.SemanticQuery)) float64 {
		t.Helper()
		found, wanted := 0, 0
		for range queries {
			q := query(b, b.gen.Query())
			if narrow != nil {
				narrow(&q)
			}
			fast, err := searchindex.SemanticSearch(b.ctx, b.pool, q)
			require.NoError(t, err)
			exact, err := searchindex.ExactSemanticSearch(b.ctx, b.pool, q)
			require.NoError(t, err)
			require.Equal(t, len(exact), len(fast))
			got := map[uuid.UUID]bool{}
			for _, h := range fast {
				got[h.StoredEmailID] = true
			}
			for _, h := range exact {
				wanted++
				if got[h.StoredEmailID] {
					found++
				}
			}
		}
		return float64(found) / float64(wanted)
	}
	// fresh stores n new messages in INBOX with one passage each, not
	// yet embedded.
	fresh := func(t *testing.T, b *testBundle, n int) []uuid.UUID {
		t.Helper()
		ids := make([]uuid.UUID, n)
		for i := range ids {
			ids[i] = uuid.New()
		}
		_, err := b.pool.Exec(b.ctx, `
			INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability, sent_at)
			SELECT x.id, f.mailbox_account_id, f.id, 1, 100000 + x.n + (SELECT count(*) FROM stored_emails), 'ExceededSizeLimit', now()
			FROM mail_folders f, unnest($1::uuid[]) WITH ORDINALITY AS x(id, n) WHERE f.alias = 'INBOX'`, ids)
		require.NoError(t, err)
		_, err = b.pool.Exec(b.ctx, `INSERT INTO email_passages (stored_email_id, ordinal, text) SELECT id, 0, 'new' FROM unnest($1::uuid[]) AS id`, ids)
		require.NoError(t, err)
		return ids
	}
	passage := func(id uuid.UUID, v []float32) []searchindex.PassageVector {
		return []searchindex.PassageVector{{Passage: searchindex.PendingPassage{StoredEmailID: id, Ordinal: 0, Text: "new"}, Vector: v}}
	}
	listOf := func(t *testing.T, b *testBundle, id uuid.UUID, ordinal int16) int32 {
		t.Helper()
		var list int32
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT list_id FROM passage_signatures WHERE stored_email_id = $1 AND ordinal = $2`,
			id, ordinal).Scan(&list))
		return list
	}

	t.Run("TheIndexFindsWhatTheExactScanFinds", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 4000)
		status, err := searchindex.ReadIndexStatus(b.ctx, b.pool, b.seeded.Profile)
		require.NoError(t, err)
		require.Equal(t, int64(12000), status.Passages)
		require.Equal(t, int64(12000), status.Pending)
		require.Equal(t, searchindex.IndexCurrent, status.Next(), "fewer passages than an index is built for")
		before := recall(t, b, 10, nil)

		number := vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 5000)
		status, err = searchindex.ReadIndexStatus(b.ctx, b.pool, b.seeded.Profile)
		require.NoError(t, err)
		require.Equal(t, number, status.Serving)
		require.Zero(t, status.Building)
		require.Zero(t, status.Pending)
		require.Zero(t, status.Outside)
		require.Equal(t, searchindex.ListsFor(12000), status.ServingLists)
		require.Equal(t, searchindex.IndexCurrent, status.Next())

		after := recall(t, b, 20, nil)
		require.GreaterOrEqual(t, after, 0.95, "recall@10 through the lists (%.3f without them)", before)

		// A passage's own vector finds its message first, through its list.
		q := query(b, b.seeded.Vectors[1234])
		hits, err := searchindex.SemanticSearch(b.ctx, b.pool, q)
		require.NoError(t, err)
		require.Equal(t, b.seeded.Emails[1234/perEmail].ID, hits[0].StoredEmailID)
		require.Equal(t, int16(1234%perEmail), hits[0].Passage)
		require.InDelta(t, 1, hits[0].Score, 1e-5)
		require.NotZero(t, listOf(t, b, hits[0].StoredEmailID, hits[0].Passage))
	})

	t.Run("PassagesWrittenAfterTheBuildAreFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 2000)
		vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 10000)
		// Two new messages, embedded as an embed job does: into their lists,
		// and without the index's copy, into the pending list.
		fresh := fresh(t, b, 2)
		listed, pending := b.gen.Passage(), b.gen.Passage()
		n, err := b.ix.WriteVectors(b.ctx, b.pool, b.seeded.Profile, passage(fresh[0], listed))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		n, err = searchindex.WriteVectors(b.ctx, b.pool, b.seeded.Profile, passage(fresh[1], pending))
		require.NoError(t, err)
		require.Equal(t, 1, n)
		require.NotZero(t, listOf(t, b, fresh[0], 0), "written into its list")
		require.Zero(t, listOf(t, b, fresh[1], 0), "pending")

		for i, v := range [][]float32{listed, pending} {
			hits, err := searchindex.SemanticSearch(b.ctx, b.pool, query(b, v))
			require.NoError(t, err)
			require.Equal(t, fresh[i], hits[0].StoredEmailID)
		}
		status, err := searchindex.ReadIndexStatus(b.ctx, b.pool, b.seeded.Profile)
		require.NoError(t, err)
		require.Equal(t, int64(1), status.Pending)
		require.Equal(t, searchindex.IndexAssign, status.Next(), "the pending passage is assigned next")
		vectortest.Assign(t, b.ctx, b.pool, b.ix, b.seeded.Profile, status.Target(), 100)
		require.NotZero(t, listOf(t, b, fresh[1], 0))
	})

	t.Run("APassageUnlikeEveryListIsFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 4000)
		vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 20000)
		// Needles: passages in directions none of the 40 topics has, each
		// embedded as an embed job does, and a query near each (cosine
		// about 0.9). Every centroid is about as far from a needle as from
		// its query, so the list nearest the needle is often not among
		// the 8 the query ranks first.
		rng := rand.New(rand.NewPCG(11, 12))
		needles := fresh(t, b, 40)
		queries := make([][]float32, len(needles))
		for i, id := range needles {
			v := vectortest.Noisy(rng, nil, dims, 1)
			queries[i] = vectortest.Noisy(rng, v, dims, 0.5)
			_, err := b.ix.WriteVectors(b.ctx, b.pool, b.seeded.Profile, passage(id, v))
			require.NoError(t, err)
			require.Zero(t, listOf(t, b, id, 0)&0xffff, "needle %d is in its generation's outlier list", i)
			require.NotZero(t, listOf(t, b, id, 0), "needle %d is not pending", i)
		}
		for i, q := range queries {
			hits, err := searchindex.SemanticSearch(b.ctx, b.pool, query(b, q))
			require.NoError(t, err)
			require.Equal(t, needles[i], hits[0].StoredEmailID, "needle %d found first", i)
		}
		// Passages like the mail the lists were trained on are in lists
		// of their own.
		listed := fresh(t, b, 1)
		_, err := b.ix.WriteVectors(b.ctx, b.pool, b.seeded.Profile, passage(listed[0], b.gen.Passage()))
		require.NoError(t, err)
		require.NotZero(t, listOf(t, b, listed[0], 0)&0xffff)
		status, err := searchindex.ReadIndexStatus(b.ctx, b.pool, b.seeded.Profile)
		require.NoError(t, err)
		require.Equal(t, searchindex.IndexCurrent, status.Next(), "the outlier list is no reason to train again yet")
	})

	t.Run("ARebuildHalfDoneFindsEveryPassage", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 2000)
		first := vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 10000)
		status, err := searchindex.ReadIndexStatus(b.ctx, b.pool, b.seeded.Profile)
		require.NoError(t, err)
		trained, err := searchindex.TrainGeneration(b.ctx, b.pool, status)
		require.NoError(t, err)
		var second int16
		require.NoError(t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
			second, err = searchindex.BeginGeneration(b.ctx, tx, trained)
			return err
		}))
		require.Equal(t, first+1, second)
		require.NoError(t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
			n, err := b.ix.AssignBatch(b.ctx, tx, b.seeded.Profile, second, 3000)
			require.Equal(t, 3000, n)
			return err
		}))
		moved := map[bool]int{}
		for i := 0; i < len(b.seeded.Vectors); i += 97 {
			e := b.seeded.Emails[i/perEmail]
			moved[listOf(t, b, e.ID, int16(i%perEmail))>>16 == int32(second)]++
			hits, err := searchindex.SemanticSearch(b.ctx, b.pool, query(b, b.seeded.Vectors[i]))
			require.NoError(t, err)
			require.Equal(t, e.ID, hits[0].StoredEmailID, "passage %d", i)
		}
		require.Positive(t, moved[true])
		require.Positive(t, moved[false])
		require.GreaterOrEqual(t, recall(t, b, 10, nil), 0.95)

		var done bool
		require.NoError(t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
			done, err = searchindex.FinishGeneration(b.ctx, tx, b.seeded.Profile, second)
			return err
		}))
		require.False(t, done, "passages remain in the first generation")
		vectortest.Assign(t, b.ctx, b.pool, b.ix, b.seeded.Profile, second, 10000)
		status, err = searchindex.ReadIndexStatus(b.ctx, b.pool, b.seeded.Profile)
		require.NoError(t, err)
		require.Equal(t, second, status.Serving)
		var generations int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(DISTINCT generation) FROM vector_index_lists`).Scan(&generations))
		require.Equal(t, 1, generations, "the first generation's centroids are gone")
		require.GreaterOrEqual(t, recall(t, b, 10, nil), 0.95)
	})

	t.Run("ANarrowedSearchAnswersAsManyAsAsked", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 4000)
		vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 20000)
		since := time.Date(2020, 1, 1, 10, 0, 0, 0, time.UTC)
		until := since.Add(2200 * time.Minute)
		for _, tc := range []struct {
			name   string
			narrow func(*searchindex.SemanticQuery)
			limit  int
			keep   func(vectortest.Email) bool
		}{
			// A small folder: its every passage is scanned.
			{"alias", func(q *searchindex.SemanticQuery) { q.Alias = "Archive" }, 500,
				func(e vectortest.Email) bool { return e.Alias == "Archive" }},
			// Two thousand two hundred messages, over half of every list:
			// probed, and the lists first probed do not hold enough.
			{"dates", func(q *searchindex.SemanticQuery) { q.SentSince, q.SentUntil = &since, &until }, 1500,
				func(e vectortest.Email) bool { return !e.SentAt.Before(since) && e.SentAt.Before(until) }},
			{"alias and dates", func(q *searchindex.SemanticQuery) { q.Alias, q.SentSince, q.SentUntil = "INBOX", &since, &until }, 1000,
				func(e vectortest.Email) bool {
					return e.Alias == "INBOX" && !e.SentAt.Before(since) && e.SentAt.Before(until)
				}},
		} {
			t.Run(tc.name, func(t *testing.T) {
				inScope := map[uuid.UUID]bool{}
				for _, e := range b.seeded.Emails {
					if tc.keep(e) {
						inScope[e.ID] = true
					}
				}
				require.Greater(t, len(inScope), tc.limit)
				q := query(b, b.gen.Query())
				tc.narrow(&q)
				q.Limit = tc.limit
				hits, err := searchindex.SemanticSearch(b.ctx, b.pool, q)
				require.NoError(t, err)
				require.Equal(t, tc.limit, len(hits), "as many as asked: the scope holds %d messages", len(inScope))
				for _, h := range hits {
					require.True(t, inScope[h.StoredEmailID], "%s is out of scope", h.StoredEmailID)
				}
				// Over a hundred queries: five leave recall to the luck of
				// the training sample (0.90 to 1.00 for the dates).
				require.GreaterOrEqual(t, recall(t, b, 100, tc.narrow), 0.95)
			})
		}
	})

	t.Run("ExcludedAndRestricted", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 2000)
		vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 10000)
		source := b.seeded.Emails[100].ID
		q := query(b, b.seeded.Vectors[100*perEmail])
		q.Exclude = []uuid.UUID{source}
		hits, err := searchindex.SemanticSearch(b.ctx, b.pool, q)
		require.NoError(t, err)
		require.Len(t, hits, 10)
		require.NotContains(t, ids(hits), source)

		only := []uuid.UUID{b.seeded.Emails[5].ID, b.seeded.Emails[6].ID, b.seeded.Emails[7].ID}
		q = query(b, b.gen.Query())
		q.Emails = only
		hits, err = searchindex.SemanticSearch(b.ctx, b.pool, q)
		require.NoError(t, err)
		require.ElementsMatch(t, only, ids(hits))
	})

	t.Run("APassageWrittenIntoAReplacedGenerationIsFoundAndAssigned", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 2000)
		first := vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 10000)
		ids := fresh(t, b, 2)

		// A writer that read the first generation as the newest and whose
		// statement saw the index before the next generation was built —
		// its snapshot taken then — commits into the first's lists after
		// the second replaced them.
		writer, err := b.pool.BeginTx(b.ctx, pgx.TxOptions{IsoLevel: pgx.RepeatableRead})
		require.NoError(t, err)
		defer writer.Rollback(context.WithoutCancel(b.ctx))
		_, err = writer.Exec(b.ctx, `SELECT count(*) FROM vector_indexes`)
		require.NoError(t, err)
		second := vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 10000)
		require.Equal(t, first+1, second)
		late := b.gen.Passage()
		_, err = b.ix.WriteVectorsAs(b.ctx, writer, b.seeded.Profile, first, passage(ids[0], late))
		require.NoError(t, err)
		require.NoError(t, writer.Commit(b.ctx))
		require.Equal(t, int32(first), listOf(t, b, ids[0], 0)>>16, "in a list of a generation no longer live")

		// Searches read it below the live generation's lists; the next check
		// assigns it.
		hits, err := searchindex.SemanticSearch(b.ctx, b.pool, query(b, late))
		require.NoError(t, err)
		require.Equal(t, ids[0], hits[0].StoredEmailID)
		status, err := searchindex.ReadIndexStatus(b.ctx, b.pool, b.seeded.Profile)
		require.NoError(t, err)
		require.Equal(t, int64(1), status.Pending)
		require.Equal(t, searchindex.IndexAssign, status.Next())
		require.Equal(t, second, status.Target())
		vectortest.Assign(t, b.ctx, b.pool, b.ix, b.seeded.Profile, second, 10000)
		require.Equal(t, int32(second), listOf(t, b, ids[0], 0)>>16)

		// A writer that still holds the first generation but writes now sees
		// it replaced, and writes pending.
		_, err = b.ix.WriteVectorsAs(b.ctx, b.pool, b.seeded.Profile, first, passage(ids[1], b.gen.Passage()))
		require.NoError(t, err)
		require.Zero(t, listOf(t, b, ids[1], 0))
	})

	t.Run("PassagesStoredBeforeCodesAreFoundBySignature", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 1000)
		// As the migration leaves what was embedded before it: no code, no
		// copies, pending.
		_, err := b.pool.Exec(b.ctx, `UPDATE passage_signatures SET code = NULL, mail_folder_id = NULL, sent_at = NULL WHERE ordinal = 1`)
		require.NoError(t, err)
		check := func(t *testing.T) {
			t.Helper()
			for i := 1; i < len(b.seeded.Vectors); i += 3 * 37 {
				for _, narrow := range []func(*searchindex.SemanticQuery){nil, func(q *searchindex.SemanticQuery) { q.Alias = b.seeded.Emails[i/perEmail].Alias }} {
					q := query(b, b.seeded.Vectors[i])
					if narrow != nil {
						narrow(&q)
					}
					hits, err := searchindex.SemanticSearch(b.ctx, b.pool, q)
					require.NoError(t, err)
					require.Equal(t, b.seeded.Emails[i/perEmail].ID, hits[0].StoredEmailID, "passage %d", i)
					require.Equal(t, int16(1), hits[0].Passage)
				}
			}
		}
		check(t)
		vectortest.Build(t, b.ctx, b.pool, b.ix, b.seeded.Profile, 10000)
		var uncoded int
		require.NoError(t, b.pool.QueryRow(b.ctx, `SELECT count(*) FROM passage_signatures WHERE code IS NULL OR mail_folder_id IS NULL`).Scan(&uncoded))
		require.Zero(t, uncoded, "the build wrote every code and copy")
		check(t)
	})

	t.Run("ASearchReadsNoOtherProfilesRows", func(t *testing.T) {
		t.Parallel()
		b := setup(t, 3000)
		// The same mail embedded again under a second profile, the active
		// one, for a third of it.
		active, err := searchindex.EnsureProfile(b.ctx, b.pool, "active-model", dims)
		require.NoError(t, err)
		_, err = b.pool.Exec(b.ctx, `
			INSERT INTO passage_vectors (stored_email_id, ordinal, profile_id, vector)
			SELECT stored_email_id, ordinal, $1, vector FROM passage_vectors WHERE ordinal = 0`, active)
		require.NoError(t, err)
		_, err = b.pool.Exec(b.ctx, `
			INSERT INTO passage_signatures (stored_email_id, ordinal, profile_id, signature, code, mail_folder_id, sent_at)
			SELECT stored_email_id, ordinal, $1, signature, code, mail_folder_id, sent_at FROM passage_signatures WHERE ordinal = 0`, active)
		require.NoError(t, err)
		_, err = b.pool.Exec(b.ctx, `VACUUM ANALYZE passage_vectors, passage_signatures`)
		require.NoError(t, err)

		for _, indexed := range []bool{false, true} {
			if indexed {
				vectortest.Build(t, b.ctx, b.pool, b.ix, active, 10000)
			}
			// The search on a connection of its own, in a transaction whose
			// reads of the two tables' rows — by scan or through an index —
			// PostgreSQL counts apart (pg_stat_xact_user_tables: what the
			// connection has not yet reported, which on a fresh one is the
			// transaction's alone).
			conn, err := pgx.Connect(b.ctx, b.pool.Config().ConnString())
			require.NoError(t, err)
			defer conn.Close(context.WithoutCancel(b.ctx))
			tx, err := conn.Begin(b.ctx)
			require.NoError(t, err)
			q := query(b, b.seeded.Vectors[0])
			q.Profile = active
			hits, err := searchindex.SemanticSearch(b.ctx, tx, q)
			require.NoError(t, err)
			require.Equal(t, b.seeded.Emails[0].ID, hits[0].StoredEmailID)
			var read int64
			require.NoError(t, tx.QueryRow(b.ctx, `
				SELECT sum(coalesce(seq_tup_read, 0) + coalesce(idx_tup_fetch, 0)) FROM pg_stat_xact_user_tables
				WHERE relname IN ('passage_vectors', 'passage_signatures')`).Scan(&read))
			require.NoError(t, tx.Rollback(b.ctx))
			require.Less(t, read, int64(9000), "rows read: the active profile has 3 000, the other 9 000 (index built: %v)", indexed)
		}

		// The other profile's vectors go in bounded batches, the active
		// one's stay.
		for _, want := range []int{4000, 4000, 1000, 0} {
			n, err := searchindex.PruneVectors(b.ctx, b.pool, b.seeded.Profile, 4000)
			require.NoError(t, err)
			require.Equal(t, want, n)
		}
		require.NoError(t, searchindex.DropProfile(b.ctx, b.pool, b.seeded.Profile))
		profiles, err := searchindex.Profiles(b.ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, []searchindex.Profile{{ID: active, Model: "active-model", Dimensions: dims}}, profiles)
		hits, err := searchindex.SemanticSearch(b.ctx, b.pool, searchindex.SemanticQuery{Profile: active, Vector: b.seeded.Vectors[0],
			Accounts: []string{"primary"}, Index: b.ix})
		require.NoError(t, err)
		require.Equal(t, b.seeded.Emails[0].ID, hits[0].StoredEmailID)
	})
}
