package searchindex_test

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
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

// BenchmarkSemanticSearch measures search by meaning over synthetic
// mailboxes of 384-dimension passages, ten a message: the latency of one
// search (median and p95 over 100 queries) and its recall@10 over the
// first 30 — the share of the exact scan's ten best messages it returns
// too. The exact scan is computed here, over the vectors the benchmark
// stored, with the same scope (ExactSemanticSearch answers the same; it is
// far too slow to repeat at a million passages).
//
// Two sets (vectortest): "topics", 1 000 random topics, and "overlap",
// 10 000 topics drawn around 1 000 group centres, so neighbouring topics
// overlap. The mail is spread over primary's INBOX (60 %) and Archive
// (10 %) and secondary's INBOX (30 %), one message a minute; a search is
// unnarrowed, narrowed to account secondary, to alias Archive, or to the
// sending dates of a tenth of the mail.
//
// Designs, each a sub-benchmark:
//
//   - before: the search as it was before the vector index (its statement
//     is kept here): bit_count(signature # query) over every passage, 400
//     candidates re-ranked by their full vectors; unnarrowed, and by
//     account and alias (it had no dates).
//   - noindex: SemanticSearch before the index is built: every passage's
//     code in scope scored, the best messages re-ranked.
//   - codes: the index as built (ListsFor(passages) × factor lists), probing
//     the nearest lists' 4-bit codes from the lists index alone and
//     re-ranking the best messages by their full vectors.
//   - vectors: the same lists, every passage of the probed lists compared
//     by its full vector (IVF over full vectors), unnarrowed only.
//   - signatures: the same lists, the probed lists' passages ranked by
//     signature from a covering index of their own and 400 re-ranked by
//     full vector (IVF and sign bits), unnarrowed only.
//
// The environment chooses what runs:
//
//	MAILFATHOM_BENCH_PASSAGES  passages per set, comma-separated (default 100000)
//	MAILFATHOM_BENCH_SETS      topics,overlap (default both)
//	MAILFATHOM_BENCH_DESIGNS   before,noindex,codes,vectors,signatures (default before,codes)
//	MAILFATHOM_BENCH_LISTS     factors of ListsFor's list count, comma-separated (default 1)
//	MAILFATHOM_BENCH_PROBES    probes, comma-separated (default searchindex.DefaultProbes)
//	MAILFATHOM_BENCH_SEED      the seed of every vector and query (default 1)
//
// For example, the figures of internal/e2e/README.md:
//
//	MAILFATHOM_BENCH_PASSAGES=100000,1000000 go test ./internal/searchindex/ -run XX -bench SemanticSearch -benchtime 1x -timeout 3h
func BenchmarkSemanticSearch(b *testing.B) {
	passages := benchInts(b, "MAILFATHOM_BENCH_PASSAGES", "100000")
	probes := benchInts(b, "MAILFATHOM_BENCH_PROBES", strconv.Itoa(searchindex.DefaultProbes))
	factors := benchFloats(b, "MAILFATHOM_BENCH_LISTS", "1")
	seed := uint64(benchInts(b, "MAILFATHOM_BENCH_SEED", "1")[0])
	sets := strings.Split(cmp.Or(os.Getenv("MAILFATHOM_BENCH_SETS"), "topics,overlap"), ",")
	designs := strings.Split(cmp.Or(os.Getenv("MAILFATHOM_BENCH_DESIGNS"), "before,codes"), ",")
	const dims, perEmail, queries, recallQueries = 384, 10, 100, 30
	for _, set := range sets {
		for _, n := range passages {
			b.Run(fmt.Sprintf("set=%s/passages=%d", set, n), func(b *testing.B) {
				ctx := context.Background()
				pool := dbtest.Pool(b)
				var gen *vectortest.Generator
				switch set {
				case "topics":
					gen = vectortest.NewGenerator(1000, 0, dims, seed)
				case "overlap":
					gen = vectortest.NewGenerator(10_000, 1000, dims, seed)
				default:
					b.Fatalf("unknown set %q", set)
				}
				start := time.Now()
				seeded := vectortest.Seed(b, ctx, pool, vectortest.Layout{Emails: n / perEmail, PerEmail: perEmail, Seed: seed,
					Folders: []vectortest.Folder{
						{Account: "primary", Alias: "INBOX", Share: 0.6},
						{Account: "primary", Alias: "Archive", Share: 0.1},
						{Account: "secondary", Alias: "INBOX", Share: 0.3}}},
					gen.Passage)
				b.Logf("seeded %d passages in %s (load %s)", n, time.Since(start).Round(time.Second), loadAverage())
				qs := make([][]float32, queries)
				for i := range qs {
					qs[i] = gen.Query()
				}
				first, last := seeded.Emails[0].SentAt, seeded.Emails[len(seeded.Emails)-1].SentAt
				since := first.Add(last.Sub(first) * 45 / 100)
				until := first.Add(last.Sub(first) * 55 / 100)
				cases := []benchCase{
					{name: "none"},
					{name: "account", narrow: func(q *searchindex.SemanticQuery) { q.Account = "secondary" },
						keep: func(e vectortest.Email) bool { return e.Account == "secondary" }},
					{name: "alias", narrow: func(q *searchindex.SemanticQuery) { q.Alias = "Archive" },
						keep: func(e vectortest.Email) bool { return e.Alias == "Archive" }},
					{name: "dates", narrow: func(q *searchindex.SemanticQuery) { q.SentSince, q.SentUntil = &since, &until },
						keep: func(e vectortest.Email) bool { return !e.SentAt.Before(since) && e.SentAt.Before(until) }},
				}
				for i := range cases {
					cases[i].exact = exactTopTen(seeded, qs[:recallQueries], cases[i].keep)
				}
				base := searchindex.SemanticQuery{Profile: seeded.Profile, Accounts: []string{"primary", "secondary"}, Limit: 10}
				// The full scans read every signature or code: fewer queries
				// at a million passages.
				scanned := qs[:min(queries, max(30, 10_000_000/n))]
				if slices.Contains(designs, "before") {
					for _, c := range cases[:3] {
						b.Run("design=before/filter="+c.name, func(b *testing.B) {
							q := base
							if c.narrow != nil {
								c.narrow(&q)
							}
							runBefore(b, ctx, pool, q, scanned, c.exact)
						})
					}
				}
				if slices.Contains(designs, "noindex") {
					for _, c := range cases {
						b.Run("design=noindex/filter="+c.name, func(b *testing.B) {
							runBenchCase(b, ctx, pool, base, scanned, c, seeded)
						})
					}
				}
				for _, factor := range factors {
					ix := searchindex.NewVectorIndex()
					start := time.Now()
					lists := buildBenchIndex(b, ctx, pool, ix, seeded.Profile, factor)
					b.Logf("built %d lists over %d passages in %s (load %s)", lists, n, time.Since(start).Round(time.Second), loadAverage())
					for _, p := range probes {
						for _, design := range designs {
							switch design {
							case "codes":
								for _, c := range cases {
									b.Run(fmt.Sprintf("design=codes/lists=%d/probes=%d/filter=%s", lists, p, c.name), func(b *testing.B) {
										q := base
										q.Index, q.Probes = ix, p
										runBenchCase(b, ctx, pool, q, qs, c, seeded)
									})
								}
							case "vectors", "signatures":
								b.Run(fmt.Sprintf("design=%s/lists=%d/probes=%d/filter=none", design, lists, p), func(b *testing.B) {
									runProbeVariant(b, ctx, pool, design, seeded, qs, cases[0].exact, p)
								})
							}
						}
					}
				}
			})
		}
	}
}

// benchCase is one scope of BenchmarkSemanticSearch's searches.
type benchCase struct {
	name   string
	narrow func(*searchindex.SemanticQuery)
	keep   func(vectortest.Email) bool
	// exact holds each recall query's ten best messages in scope.
	exact []map[uuid.UUID]bool
}

// runBenchCase times query over qs narrowed as c says and reports the
// latency's median and p95, recall@10 against c.exact, and the load.
func runBenchCase(b *testing.B, ctx context.Context, pool *pgxpool.Pool, query searchindex.SemanticQuery, qs [][]float32, c benchCase, seeded vectortest.Seeded) {
	if c.narrow != nil {
		c.narrow(&query)
	}
	var latencies []time.Duration
	var found, wanted int
	for b.Loop() {
		latencies, found, wanted = latencies[:0], 0, 0
		for i, v := range qs {
			q := query
			q.Vector = v
			start := time.Now()
			hits, err := searchindex.SemanticSearch(ctx, pool, q)
			latencies = append(latencies, time.Since(start))
			require.NoError(b, err)
			if i < len(c.exact) {
				wanted += len(c.exact[i])
				for _, h := range hits {
					if c.exact[i][h.StoredEmailID] {
						found++
					}
				}
			}
		}
	}
	reportLatencies(b, latencies, found, wanted)
}

func reportLatencies(b *testing.B, latencies []time.Duration, found, wanted int) {
	slices.Sort(latencies)
	b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(latencies[len(latencies)*95/100].Microseconds())/1000, "p95-ms")
	b.ReportMetric(float64(found)/float64(max(wanted, 1)), "recall@10")
	load, _ := strconv.ParseFloat(strings.Fields(loadAverage())[0], 64)
	b.ReportMetric(load, "load1")
}

// exactTopTen returns, for each query, its ten best messages among those
// keep keeps (all, for nil) by their best passage's exact cosine.
func exactTopTen(seeded vectortest.Seeded, qs [][]float32, keep func(vectortest.Email) bool) []map[uuid.UUID]bool {
	out := make([]map[uuid.UUID]bool, len(qs))
	for i, q := range qs {
		type scored struct {
			at    int
			score float32
		}
		best := make([]scored, 0, len(seeded.Emails))
		for m, e := range seeded.Emails {
			if keep != nil && !keep(e) {
				continue
			}
			s := float32(math.Inf(-1))
			for o := range seeded.PerEmail {
				v := seeded.Vectors[m*seeded.PerEmail+o]
				var d float32
				for j := range q {
					d += q[j] * v[j]
				}
				s = max(s, d)
			}
			best = append(best, scored{m, s})
		}
		slices.SortFunc(best, func(a, b scored) int { return cmp.Compare(b.score, a.score) })
		out[i] = map[uuid.UUID]bool{}
		for _, s := range best[:min(10, len(best))] {
			out[i][seeded.Emails[s.at].ID] = true
		}
	}
	return out
}

// buildBenchIndex builds the profile's index with ListsFor × factor
// lists, the rest as the vector_index jobs build it, and returns the list
// count.
func buildBenchIndex(b *testing.B, ctx context.Context, pool *pgxpool.Pool, ix *searchindex.VectorIndex, profile int16, factor float64) int {
	status, err := searchindex.ReadIndexStatus(ctx, pool, profile)
	require.NoError(b, err)
	trained, err := searchindex.TrainGenerationWith(ctx, pool, status, int(math.Round(factor*float64(searchindex.ListsFor(status.Passages)))))
	require.NoError(b, err)
	var number int16
	require.NoError(b, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		number, err = searchindex.BeginGeneration(ctx, tx, trained)
		return err
	}))
	vectortest.Assign(b, ctx, pool, ix, profile, number, 20_000)
	return len(trained.Centroids)
}

// runProbeVariant times a design of the index this package does not
// search by, over the lists built: "vectors" compares every passage of
// the probed lists by its full vector; "signatures" ranks them by
// signature from a covering index of their own and re-ranks 400 by full
// vector.
func runProbeVariant(b *testing.B, ctx context.Context, pool *pgxpool.Pool, design string, seeded vectortest.Seeded,
	qs [][]float32, exact []map[uuid.UUID]bool, probes int) {
	if design == "signatures" {
		_, err := pool.Exec(ctx, `CREATE INDEX IF NOT EXISTS bench_lists_signatures ON passage_signatures (profile_id, list_id)
			INCLUDE (stored_email_id, ordinal, signature)`)
		require.NoError(b, err)
		_, err = pool.Exec(ctx, `VACUUM ANALYZE passage_signatures`)
		require.NoError(b, err)
		b.Cleanup(func() { _, _ = pool.Exec(context.Background(), `DROP INDEX IF EXISTS bench_lists_signatures`) })
	}
	rows, err := pool.Query(ctx, `
		SELECT (l.generation::integer << 16) | l.list_no, l.centroid FROM vector_indexes i
		JOIN vector_index_lists l ON l.profile_id = i.profile_id AND l.generation = i.serving WHERE i.profile_id = $1`, seeded.Profile)
	require.NoError(b, err)
	type list struct {
		id       int32
		centroid []float32
	}
	var lists []list
	var id int32
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
		v, err := searchindex.DecodeVector(raw)
		lists = append(lists, list{id, v})
		return err
	})
	require.NoError(b, err)
	var latencies []time.Duration
	var found, wanted int
	for b.Loop() {
		latencies, found, wanted = latencies[:0], 0, 0
		for i, q := range qs {
			start := time.Now()
			slices.SortFunc(lists, func(x, y list) int { return cmp.Compare(benchDot(q, y.centroid), benchDot(q, x.centroid)) })
			probe := make([]int32, 0, probes)
			for _, l := range lists[:min(probes, len(lists))] {
				probe = append(probe, l.id)
			}
			statement := `
				SELECT s.stored_email_id, v.vector FROM passage_signatures s
				JOIN passage_vectors v ON v.stored_email_id = s.stored_email_id AND v.ordinal = s.ordinal AND v.profile_id = s.profile_id
				WHERE s.profile_id = $1 AND s.list_id = ANY($2)`
			if design == "signatures" {
				statement = `
					WITH c AS MATERIALIZED (
						SELECT s.stored_email_id, s.ordinal FROM passage_signatures s
						WHERE s.profile_id = $1 AND s.list_id = ANY($2)
						ORDER BY bit_count(s.signature # $3::varbit) LIMIT 400)
					SELECT c.stored_email_id, v.vector FROM c
					JOIN passage_vectors v ON v.stored_email_id = c.stored_email_id AND v.ordinal = c.ordinal AND v.profile_id = $1`
			}
			args := []any{seeded.Profile, probe}
			if design == "signatures" {
				args = append(args, searchindex.Signature(q))
			}
			rows, err := pool.Query(ctx, statement, args...)
			require.NoError(b, err)
			best := map[uuid.UUID]float32{}
			var id uuid.UUID
			_, err = pgx.ForEachRow(rows, []any{&id, &raw}, func() error {
				v, err := searchindex.DecodeVector(raw)
				if s, ok := best[id]; !ok || benchDot(q, v) > s {
					best[id] = benchDot(q, v)
				}
				return err
			})
			require.NoError(b, err)
			ranked := make([]uuid.UUID, 0, len(best))
			for id := range best {
				ranked = append(ranked, id)
			}
			slices.SortFunc(ranked, func(x, y uuid.UUID) int { return cmp.Compare(best[y], best[x]) })
			latencies = append(latencies, time.Since(start))
			if i < len(exact) {
				wanted += len(exact[i])
				for _, id := range ranked[:min(10, len(ranked))] {
					if exact[i][id] {
						found++
					}
				}
			}
		}
	}
	reportLatencies(b, latencies, found, wanted)
}

// runBefore times the search as it was before the vector index, whose
// statement this keeps, over qs.
func runBefore(b *testing.B, ctx context.Context, pool *pgxpool.Pool, q searchindex.SemanticQuery, qs [][]float32, exact []map[uuid.UUID]bool) {
	candidates := `
		SELECT s.stored_email_id, s.ordinal
		FROM passage_signatures s
		WHERE s.profile_id = $1
		ORDER BY bit_count(s.signature # $2::varbit)
		LIMIT $6`
	if q.Account != "" || q.Alias != "" {
		candidates = `
			SELECT s.stored_email_id, s.ordinal
			FROM passage_signatures s
			JOIN served_stored_emails e ON e.id = s.stored_email_id
			JOIN mail_folders f ON f.id = e.mail_folder_id
			JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
			WHERE s.profile_id = $1
			  AND a.account_key = ANY($3)
			  AND ($4 = '' OR a.account_key = $4)
			  AND ($5 = '' OR f.alias = $5)
			ORDER BY bit_count(s.signature # $2::varbit)
			LIMIT $6`
	}
	var latencies []time.Duration
	var found, wanted int
	for b.Loop() {
		latencies, found, wanted = latencies[:0], 0, 0
		for i, v := range qs {
			start := time.Now()
			rows, err := pool.Query(ctx, `
				WITH candidates AS MATERIALIZED (`+candidates+`)
				SELECT c.stored_email_id, v.vector, m.account_key, m.alias, m.sent_at, m.sender, m.subject
				FROM candidates c
				CROSS JOIN LATERAL (
					SELECT a.account_key, f.alias, e.sent_at,
					       coalesce((SELECT p.address FROM email_participants p
					                 WHERE p.stored_email_id = e.id AND p.role = 'From' ORDER BY p.position LIMIT 1), '') AS sender,
					       coalesce(e.subject, '') AS subject
					FROM served_stored_emails e
					JOIN mail_folders f ON f.id = e.mail_folder_id
					JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
					WHERE e.id = c.stored_email_id
					  AND a.account_key = ANY($3)
					  AND ($4 = '' OR a.account_key = $4)
					  AND ($5 = '' OR f.alias = $5)
					OFFSET 0) m
				JOIN passage_vectors v ON v.stored_email_id = c.stored_email_id AND v.ordinal = c.ordinal AND v.profile_id = $1`,
				q.Profile, searchindex.Signature(v), q.Accounts, q.Account, q.Alias, searchindex.DefaultCandidates)
			require.NoError(b, err)
			best := map[uuid.UUID]float32{}
			var id uuid.UUID
			var raw []byte
			var account, alias, sender, subject string
			var sent *time.Time
			_, err = pgx.ForEachRow(rows, []any{&id, &raw, &account, &alias, &sent, &sender, &subject}, func() error {
				vec, err := searchindex.DecodeVector(raw)
				if s, ok := best[id]; !ok || benchDot(v, vec) > s {
					best[id] = benchDot(v, vec)
				}
				return err
			})
			require.NoError(b, err)
			ranked := make([]uuid.UUID, 0, len(best))
			for id := range best {
				ranked = append(ranked, id)
			}
			slices.SortFunc(ranked, func(x, y uuid.UUID) int { return cmp.Compare(best[y], best[x]) })
			latencies = append(latencies, time.Since(start))
			if i < len(exact) {
				wanted += len(exact[i])
				for _, id := range ranked[:min(10, len(ranked))] {
					if exact[i][id] {
						found++
					}
				}
			}
		}
	}
	reportLatencies(b, latencies, found, wanted)
}

func benchDot(a, b []float32) float32 {
	var s float32
	for i := range a {
		s += a[i] * b[i]
	}
	return s
}

func benchInts(b *testing.B, name, def string) []int {
	var out []int
	for _, f := range strings.Split(cmp.Or(os.Getenv(name), def), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		out = append(out, n)
	}
	return out
}

func benchFloats(b *testing.B, name, def string) []float64 {
	var out []float64
	for _, f := range strings.Split(cmp.Or(os.Getenv(name), def), ",") {
		x, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			b.Fatalf("%s: %v", name, err)
		}
		out = append(out, x)
	}
	return out
}

// loadAverage is the machine's load averages over 1, 5 and 15 minutes.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:3], " ")
}
