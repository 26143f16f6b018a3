package searchindex_test

import (
	"cmp"
	"context"
	"os"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// searchTarget is the p95 a search must answer in at 100 000 messages.
const searchTarget = 50 * time.Millisecond

// BenchmarkSearch measures lexical search latency (median and p95 over
// repeated queries) over N stored messages (MAILFATHOM_BENCH_SEARCH_MESSAGES,
// default 100 000) whose bodies draw 300 words each from a 50 000-word
// vocabulary with Zipf-like frequencies, so some words are rare and some
// are in most messages: a rare word, one in about a tenth of the mail, a
// third of it and nearly all of it, two common words together and a
// common word with a rare one. Each query's log line names the strategy
// mailfathom_search chose for it ("index", "window" or "recent") and the planner's
// estimate behind the choice. It runs on demand only:
//
//	go test -run '^$' -bench Search -benchtime 1x -timeout 30m ./internal/searchindex
//
// The documents are written by SQL, not by the forward pass: only the rows
// a search reads matter here, and the corpus takes seconds rather than an
// hour to build.
func BenchmarkSearch(b *testing.B) {
	n := 100_000
	if v := os.Getenv("MAILFATHOM_BENCH_SEARCH_MESSAGES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err)
	}
	ctx := context.Background()
	pool := dbtest.Pool(b)
	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(b, err)
	tx, err := pool.Begin(ctx)
	require.NoError(b, err)
	binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
	require.NoError(b, err)
	require.NoError(b, tx.Commit(ctx))

	start := time.Now()
	// Word k of the vocabulary is "w<k>", drawn with probability about
	// proportional to 1/k (k = 50000^random).
	const chunk = 10_000
	for from := 1; from <= n; from += chunk {
		_, err := pool.Exec(ctx, `
			WITH msgs AS (
				SELECT g AS uid, gen_random_uuid() AS id FROM generate_series($3::int, $4::int) g),
			ins AS (
				INSERT INTO stored_emails (id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability,
				                           rfc822_size, internal_date, subject, sent_at, mime_readable)
				SELECT id, $1, $2, 1, uid, 'Available', 5000, timestamptz '2020-01-01' + uid * interval '20 minutes',
				       'Subject ' || uid, timestamptz '2020-01-01' + uid * interval '20 minutes', true
				FROM msgs)
			INSERT INTO email_search_documents (stored_email_id, text_source, subject, participants, body_text, sent_at, mail_folder_id)
			SELECT id, 'PlainText', 'Subject ' || uid, 'sender' || (uid % 97) || '@example.test',
			       body.text, timestamptz '2020-01-01' + uid * interval '20 minutes', $2
			FROM msgs CROSS JOIN LATERAL (
				-- The condition on msgs makes the draw per message.
				SELECT string_agg('w' || floor(power(50000, random()))::int, ' ') AS text
				FROM generate_series(1, 300) s WHERE s > -msgs.uid) body`, accountID, binding.ID, from, min(n, from+chunk-1))
		require.NoError(b, err)
	}
	_, err = pool.Exec(ctx, "VACUUM ANALYZE stored_emails, email_search_documents")
	require.NoError(b, err)
	b.Logf("%d messages written in %v", n, time.Since(start).Round(time.Second))

	queries := []struct{ name, text string }{
		{"rare", "w40000"},
		{"middle", "w300"},
		{"third", "w60"},
		{"most", "w5"},
		{"two-words", "w60 w300"},
		{"common-and-rare", "w60 w40000"},
	}
	for _, q := range queries {
		var matches int
		require.NoError(b, pool.QueryRow(ctx, `SELECT count(*) FROM email_search_documents WHERE search_vector @@ websearch_to_tsquery('simple', $1)`, q.text).Scan(&matches))
		strategy, err := searchindex.SearchStrategy(ctx, pool, "simple", q.text)
		require.NoError(b, err)
		b.Run(q.name, func(b *testing.B) {
			var times []time.Duration
			for range b.N {
				for range 30 {
					t0 := time.Now()
					hits, err := searchindex.Search(ctx, pool, searchindex.Query{Text: q.text, Accounts: []string{"primary"}, Configuration: "simple"})
					times = append(times, time.Since(t0))
					require.NoError(b, err)
					require.NotEmpty(b, hits)
				}
			}
			slices.Sort(times)
			p50, p95 := times[len(times)/2], times[len(times)*95/100]
			b.ReportMetric(float64(p50.Microseconds())/1000, "p50_ms")
			b.ReportMetric(float64(p95.Microseconds())/1000, "p95_ms")
			b.Logf("%q matches %d of %d (%.1f %%; estimated %.0f, so %s): p50 %v, p95 %v (target p95 %v: %s)", q.text, matches, n, 100*float64(matches)/float64(n),
				strategy.EstimatedMatches, strategy.Name,
				p50.Round(time.Millisecond/10), p95.Round(time.Millisecond/10), searchTarget, cmp.Or(map[bool]string{true: "met"}[p95 <= searchTarget], "MISSED"))
		})
	}
}
