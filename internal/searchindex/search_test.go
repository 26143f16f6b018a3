package searchindex_test

import (
	"context"
	"testing"
	"time"

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
				INSERT INTO email_search_documents (stored_email_id, text_source, subject, body_text)
				SELECT id, 'PlainText',
				       CASE WHEN $5 AND uid = 1 THEN 'rarity' ELSE 'Message ' || uid END,
				       'a common word' || CASE WHEN $5 AND uid IN (1, 10, 20) THEN ' and a rarity' ELSE '' END
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
		strategy, err := searchindex.SearchStrategy(ctx, b.pool, "simple", "common")
		require.NoError(t, err)
		require.Equal(t, "recent", strategy.Name, "a word in every message is walked newest first: %+v", strategy)

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
