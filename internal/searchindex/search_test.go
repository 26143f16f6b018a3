package searchindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

func TestSearchWindow(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool *pgxpool.Pool
	}

	// The mailbox: "Archive" holds RankWindow+100 messages, the newest of
	// all, every one saying "common"; "INBOX" holds 30 older ones, also
	// saying "common". "rarity" is in three of INBOX's, and the subject of
	// the oldest of all, so that one ranks best.
	const archived, inboxed = searchindex.RankWindow + 100, 30
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		for _, f := range []struct {
			alias      string
			n, newest  int
			rareSuffix string
		}{{"INBOX", inboxed, 0, ""}, {"Archive", archived, inboxed, ""}} {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			b, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, f.alias, f.alias, "/")
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))
			_, err = pool.Exec(ctx, `
				WITH msgs AS (
					SELECT g AS uid, gen_random_uuid() AS id, timestamptz '2024-01-01' + ($3::int + g) * interval '1 hour' AS sent
					FROM generate_series(1, $4::int) g),
				ins AS (
					INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability,
					                           rfc822_size, internal_date, subject, sent_at, mime_readable)
					SELECT id, $1, $2, 1, uid, 'Available', 100, sent, 'Message ' || uid, sent, true FROM msgs)
				INSERT INTO email_search_documents (stored_email_id, text_source, subject, body_text, sent_at, mail_folder_id)
				SELECT id, 'PlainText',
				       CASE WHEN $5 AND uid = 1 THEN 'rarity' ELSE 'Message ' || uid END,
				       'a common word' || CASE WHEN $5 AND uid IN (1, 10, 20) THEN ' and a rarity' ELSE '' END,
				       sent, $2
				FROM msgs`, accountID, b.ID, f.newest, f.n, f.alias == "INBOX")
			require.NoError(t, err)
		}
		// The strategy follows the planner's statistics, as after autovacuum.
		_, err = pool.Exec(ctx, `ANALYZE email_search_documents`)
		require.NoError(t, err)
		return ctx, &testBundle{pool: pool}
	}

	search := func(ctx context.Context, t *testing.T, b *testBundle, text, alias string, limit int) []searchindex.Hit {
		t.Helper()
		hits, err := searchindex.Search(ctx, b.pool, searchindex.Query{Text: text, Accounts: []string{"primary"}, Alias: alias,
			Limit: limit, Configuration: "simple"})
		require.NoError(t, err)
		return hits
	}

	t.Run("CommonWordRanksTheNewestMatchesOfTheNarrowedMail", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		// Every strategy answers alike (TestSearchStrategiesAgree); at
		// this size the word's matches are collected.
		// Unnarrowed, the window holds Archive's newest messages only.
		hits := search(ctx, t, b, "common", "", 500)
		require.Len(t, hits, 500)
		for _, h := range hits {
			require.Equal(t, "Archive", h.Alias)
		}
		// Narrowed to INBOX, the window is INBOX's newest matches: all of
		// them, though every one is older than the whole of Archive.
		hits = search(ctx, t, b, "common", "INBOX", 500)
		require.Len(t, hits, inboxed)
		for _, h := range hits {
			require.Equal(t, "INBOX", h.Alias)
		}
		// Equal ranks: most recently sent first.
		require.True(t, hits[0].SentAt.After(*hits[1].SentAt))
	})

	t.Run("RareWordRanksEveryMatch", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		strategy, err := searchindex.SearchStrategy(ctx, b.pool, "simple", "rarity")
		require.NoError(t, err)
		require.Equal(t, "index", strategy.Name, "a word in three messages is found through the index: %+v", strategy)

		hits := search(ctx, t, b, "rarity", "", 20)
		require.Len(t, hits, 3)
		// The oldest message of all ranks first: its subject says it.
		require.Equal(t, "INBOX", hits[0].Alias)
		require.Equal(t, "Message 1", hits[0].Subject)
		require.True(t, hits[0].SentAt.Before(*hits[1].SentAt))
		require.Greater(t, hits[0].Rank, hits[1].Rank)

		// Two words, one common and one rare, find the rare one's matches.
		require.Len(t, search(ctx, t, b, "common rarity", "", 20), 3)
		require.Len(t, search(ctx, t, b, "common -rarity", "INBOX", 500), inboxed-3)
	})
}

// TestSearchStrategiesAgree checks that mailfathom_search's strategies find
// the same window of matches: a window of ten over a small mailbox makes a
// word in a fifth of it take the range of the newest documents ('window')
// and a word in all of it the walk ('recent'), each compared with
// collecting every match ('index').
func TestSearchStrategiesAgree(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool    *pgxpool.Pool
		folders map[string]int64
	}

	// INBOX holds 150 messages, Archive 50 older ones; "common" is in all,
	// "middle" in every fifth. INBOX's 20 oldest have no sending date.
	const window = 10
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		b := &testBundle{pool: pool, folders: map[string]int64{}}
		for _, f := range []struct {
			alias          string
			n, after, null int
		}{{"INBOX", 150, 50, 20}, {"Archive", 50, 0, 0}} {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, f.alias, f.alias, "/")
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))
			b.folders[f.alias] = binding.ID
			_, err = pool.Exec(ctx, `
				WITH msgs AS (
					SELECT g AS uid, gen_random_uuid() AS id,
					       CASE WHEN g > $5 THEN timestamptz '2024-01-01' + ($3::int + g) * interval '1 hour' END AS sent
					FROM generate_series(1, $4::int) g),
				ins AS (
					INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability,
					                           rfc822_size, internal_date, subject, sent_at, mime_readable)
					SELECT id, $1, $2, 1, uid, 'Available', 100, now(), 'Message ' || uid, sent, true FROM msgs)
				INSERT INTO email_search_documents (stored_email_id, text_source, subject, body_text, sent_at, mail_folder_id)
				SELECT id, 'PlainText', 'Message ' || uid,
				       'common' || CASE WHEN uid % 5 = 0 THEN ' middle' ELSE '' END, sent, $2
				FROM msgs`, accountID, binding.ID, f.after, f.n, f.null)
			require.NoError(t, err)
		}
		_, err = pool.Exec(ctx, `ANALYZE email_search_documents`)
		require.NoError(t, err)
		return ctx, b
	}

	// find returns the ids of the window one strategy finds, most
	// recently sent first.
	find := func(ctx context.Context, t *testing.T, b *testBundle, function, text string, folders ...string) []uuid.UUID {
		t.Helper()
		ids := make([]int64, len(folders))
		for i, f := range folders {
			ids[i] = b.folders[f]
		}
		args := []any{text, ids, window}
		call := function + `(websearch_to_tsquery('simple', $1), $2, $3)`
		if function == "mailfathom_search_windowed" {
			call = function + `(websearch_to_tsquery('simple', $1), $2, $3, (mailfathom_search_strategy('simple', $1, $3)).estimated_matches)`
		}
		rows, err := b.pool.Query(ctx, `SELECT id FROM `+call+` ORDER BY sent_at DESC NULLS LAST, id DESC`, args...)
		require.NoError(t, err)
		found, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		require.NoError(t, err)
		return found
	}
	strategy := func(ctx context.Context, t *testing.T, b *testBundle, text string) string {
		t.Helper()
		var name string
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT strategy FROM mailfathom_search_strategy('simple', $1, $2)`, text, window).Scan(&name))
		return name
	}
	agree := func(ctx context.Context, t *testing.T, b *testBundle, function, text string, folders ...string) []uuid.UUID {
		t.Helper()
		want := find(ctx, t, b, "mailfathom_search_matching", text, folders...)
		require.Equal(t, want, find(ctx, t, b, function, text, folders...), "%s %q in %v", function, text, folders)
		return want
	}

	t.Run("MiddleWordReadsTheNewestRange", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.Equal(t, "window", strategy(ctx, t, b, "middle"))
		newest := agree(ctx, t, b, "mailfathom_search_windowed", "middle", "INBOX", "Archive")
		require.Len(t, newest, window)

		// A tombstoned match leaves the window to the next served one.
		_, err := b.pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, newest[0])
		require.NoError(t, err)
		served := agree(ctx, t, b, "mailfathom_search_windowed", "middle", "INBOX", "Archive")
		require.Equal(t, newest[1:], served[:window-1])

		// Narrowed to the older folder, the range widens until it holds
		// Archive's ten newest matches.
		archive := agree(ctx, t, b, "mailfathom_search_windowed", "middle", "Archive")
		require.Len(t, archive, window)

		// A message sent again later (its date corrected) follows into the
		// range: the document's copy of its date is kept in step.
		_, err = b.pool.Exec(ctx, `UPDATE stored_emails SET sent_at = timestamptz '2030-01-01' WHERE id = $1`, archive[window-1])
		require.NoError(t, err)
		moved := agree(ctx, t, b, "mailfathom_search_windowed", "middle", "INBOX", "Archive")
		require.Equal(t, archive[window-1], moved[0])

		// The product's search takes the same window and ranks it.
		var hits int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM mailfathom_search('simple', 'middle', '{primary}', max_hits => 500, rank_window => $1)`,
			window).Scan(&hits))
		require.Equal(t, window, hits)
	})

	t.Run("UndatedMatchesAreReachedLast", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		// INBOX's undated "middle" matches (4) rank after its dated ones
		// (26), and are in the window only once fewer than ten dated ones
		// are served: tombstoning all but 4 leaves a window of 8.
		_, err := b.pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now()
			WHERE mail_folder_id = $1 AND sent_at IS NOT NULL AND uid % 5 = 0 AND uid > 40`, b.folders["INBOX"])
		require.NoError(t, err)
		found := agree(ctx, t, b, "mailfathom_search_windowed", "middle", "INBOX")
		require.Len(t, found, 8, "four dated served matches and four undated")
		var undated int
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM stored_emails WHERE id = ANY($1) AND sent_at IS NULL`, found).Scan(&undated))
		require.Equal(t, 4, undated)
	})

	t.Run("CommonWordWalksTheNewestMail", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		require.Equal(t, "recent", strategy(ctx, t, b, "common"))
		require.Len(t, agree(ctx, t, b, "mailfathom_search_recent", "common", "INBOX", "Archive"), window)
		require.Len(t, agree(ctx, t, b, "mailfathom_search_windowed", "common", "Archive"), window)
		require.Equal(t, "index", strategy(ctx, t, b, "middle -common"))
	})
}
