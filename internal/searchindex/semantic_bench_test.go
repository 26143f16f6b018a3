package searchindex_test

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
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

// BenchmarkSemanticSearch measures the signature scan with exact
// re-ranking over 10 000 and 100 000 passages of 384 dimensions (ten per
// message): the latency of one search (median and p95 over 100 queries)
// and its recall@10 over the first 30 — the share of the exact scan's ten
// best messages it returns too.
//
// The vectors are synthetic and clustered the way embeddings of a mailbox
// are (topics): 1 000 random unit centres, each passage its centre plus
// noise of equal norm (cosine about 0.7 to its centre). A query is a fresh
// point of a random cluster, so its true neighbours are a cluster's
// passages among many near-orthogonal others.
//
//	go test ./internal/searchindex/ -run XX -bench SemanticSearch -benchtime 1x
func BenchmarkSemanticSearch(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprintf("passages=%d", n), func(b *testing.B) {
			const dims, perEmail, queries, recallQueries = 384, 10, 100, 30
			ctx := context.Background()
			pool := dbtest.Pool(b)
			rng := rand.New(rand.NewPCG(1, uint64(n)))
			centres := make([][]float32, 1000)
			for i := range centres {
				centres[i] = noisy(rng, nil, dims, 1)
			}
			profile := seedVectors(b, ctx, pool, n/perEmail, perEmail, func() []float32 {
				return noisy(rng, centres[rng.IntN(len(centres))], dims, 1)
			})

			var latencies []time.Duration
			var found, wanted int
			for b.Loop() {
				latencies, found, wanted = latencies[:0], 0, 0
				for i := range queries {
					q := searchindex.SemanticQuery{Profile: profile, Vector: noisy(rng, centres[rng.IntN(len(centres))], dims, 1),
						Accounts: []string{"primary"}, Limit: 10}
					start := time.Now()
					fast, err := searchindex.SemanticSearch(ctx, pool, q)
					latencies = append(latencies, time.Since(start))
					require.NoError(b, err)
					if i >= recallQueries {
						continue // the exact scan reads every vector: a sample is enough
					}
					exact, err := searchindex.ExactSemanticSearch(ctx, pool, q)
					require.NoError(b, err)
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
			}
			slices.Sort(latencies)
			b.ReportMetric(float64(latencies[len(latencies)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(latencies[len(latencies)*95/100].Microseconds())/1000, "p95-ms")
			b.ReportMetric(float64(found)/float64(wanted), "recall@10")
		})
	}
}

// noisy returns centre plus Gaussian noise of norm about scale, unit
// length; a nil centre gives a random unit vector.
func noisy(rng *rand.Rand, centre []float32, dims int, scale float64) []float32 {
	v := make([]float64, dims)
	sigma := scale / math.Sqrt(float64(dims))
	if centre == nil {
		sigma = 1
	}
	var norm float64
	for i := range v {
		v[i] = rng.NormFloat64() * sigma
		if centre != nil {
			v[i] += float64(centre[i])
		}
		norm += v[i] * v[i]
	}
	out := make([]float32, dims)
	for i := range v {
		out[i] = float32(v[i] / math.Sqrt(norm))
	}
	return out
}

// seedVectors stores emails messages of account primary with perEmail
// passages each, gives every passage a vector from next under one
// profile, and returns the profile.
func seedVectors(tb testing.TB, ctx context.Context, pool *pgxpool.Pool, emails, perEmail int, next func() []float32) int16 {
	tb.Helper()
	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(tb, err)
	tx, err := pool.Begin(ctx)
	require.NoError(tb, err)
	binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
	require.NoError(tb, err)
	ids := make([]uuid.UUID, emails)
	for i := range ids {
		ids[i], err = mailstore.UpsertOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
			UIDValidity: 1, UID: uint32(i + 1), Size: 1 << 30, Subject: "s", Availability: mailstore.ExceededSizeLimit})
		require.NoError(tb, err)
	}
	_, err = tx.Exec(ctx, `
		INSERT INTO email_passages (stored_email_id, ordinal, text)
		SELECT e.id, g, 'passage ' || g FROM stored_emails e, generate_series(0, $1 - 1) AS g`, perEmail)
	require.NoError(tb, err)
	profile, err := searchindex.EnsureProfile(ctx, tx, "synthetic", 384)
	require.NoError(tb, err)
	vectors := make([][]any, 0, emails*perEmail)
	signatures := make([][]any, 0, emails*perEmail)
	for _, id := range ids {
		for o := range perEmail {
			v := next()
			vectors = append(vectors, []any{id, int16(o), profile, searchindex.EncodeVector(v)})
			signatures = append(signatures, []any{id, int16(o), profile, searchindex.Signature(v)})
		}
	}
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"passage_vectors"}, []string{"stored_email_id", "ordinal", "profile_id", "vector"},
		pgx.CopyFromRows(vectors))
	require.NoError(tb, err)
	_, err = tx.CopyFrom(ctx, pgx.Identifier{"passage_signatures"}, []string{"stored_email_id", "ordinal", "profile_id", "signature"},
		pgx.CopyFromRows(signatures))
	require.NoError(tb, err)
	require.NoError(tb, tx.Commit(ctx))
	_, err = pool.Exec(ctx, `VACUUM ANALYZE passage_vectors, passage_signatures`)
	require.NoError(tb, err)
	_, err = pool.Exec(ctx, `ANALYZE stored_emails`)
	require.NoError(tb, err)
	return profile
}
