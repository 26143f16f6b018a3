package searchindex_test

import (
	"context"
	"crypto/sha256"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/vectortest"
	"github.com/mailfathom/mailfathom/mimex"
	"github.com/mailfathom/mailfathom/schema"
)

// BenchmarkEmbedDatabaseTime measures the database time an embed job's
// statements take — reading the passages awaiting vectors, then storing
// the vectors — in three variants over the same 2 000 stored messages
// (about 6 passages each, 384 dimensions) in jobs of 16 messages, each in a
// fresh database of one durable cluster with pg_stat_statements:
//
//   - before: the schema and the statement as they were before the vector
//     index (a vector and its signature; the vectors' profile index);
//   - pending: today's, with no index (each passage's code and copies of
//     its message's folder and date, in the lists index's pending range);
//   - indexed: today's, with a serving generation of 4 000 lists, as a
//     million passages have (each passage put in its nearest list as it
//     is written, the index read FOR SHARE).
//
// The variants embed their messages a twentieth at a time, in turn (in
// another order each time), so the machine's other load weighs on each
// alike. It reports each variant's database time per job (the statements'
// execution and planning time, as pg_stat_statements sums them) and the
// increase over before. The vectors are computed before the timing starts
// and no River runs, so the figures are the embed job's own statements;
// what River spends fetching and completing a job is the same in every
// variant. MAILFATHOM_BENCH_MESSAGES sets the messages (default 2000).
//
//	go test ./internal/searchindex/ -run XX -bench EmbedDatabaseTime -benchtime 1x
func BenchmarkEmbedDatabaseTime(b *testing.B) {
	messages := 2000
	if v := os.Getenv("MAILFATHOM_BENCH_MESSAGES"); v != "" {
		var err error
		if messages, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	const dims, batch = 384, 16
	ctx := context.Background()
	// A directory the cluster's own user can enter, as root runs it.
	dir, err := os.MkdirTemp("", "mailfathom-embed-cost-")
	require.NoError(b, err)
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(b, os.Chmod(dir, 0o755))
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: filepath.Join(dir, "postgres"), Durable: true, Logf: b.Logf,
		Settings: map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}})
	require.NoError(b, err)
	b.Cleanup(func() { _ = cluster.Stop(context.Background()) })

	// Every variant's database, seeded alike; the variants then embed
	// their messages slice by slice in turn, so the machine's other load
	// weighs on each alike.
	type bench struct {
		name    string
		pool    *pgxpool.Pool
		ids     []uuid.UUID
		profile int16
		vectors map[searchindex.PendingPassage][]float32
		write   func(vs []searchindex.PassageVector) error
		jobs    int
		wall    time.Duration
	}
	var variants []*bench
	for i, name := range []string{"before", "pending", "indexed"} {
		admin, err := pgxpool.New(ctx, cluster.ConnString("postgres"))
		require.NoError(b, err)
		db := fmt.Sprintf("embed_cost_%d", i)
		_, err = admin.Exec(ctx, "CREATE DATABASE "+db)
		require.NoError(b, err)
		admin.Close()
		v := &bench{name: name, vectors: map[searchindex.PendingPassage][]float32{}}
		v.pool, err = pgxpool.New(ctx, cluster.ConnString(db))
		require.NoError(b, err)
		b.Cleanup(v.pool.Close)
		_, err = schema.Migrate(ctx, v.pool, nil)
		require.NoError(b, err)
		v.ids = seedMessages(b, ctx, v.pool, messages)
		v.profile, err = searchindex.EnsureProfile(ctx, v.pool, "test-model", dims)
		require.NoError(b, err)
		ix := searchindex.NewVectorIndex()
		switch name {
		case "before":
			_, err = v.pool.Exec(ctx, beforeVectorIndexSQL)
			require.NoError(b, err)
			v.write = func(vs []searchindex.PassageVector) error { return writeVectorsBefore(ctx, v.pool, v.profile, vs) }
		case "pending":
			v.write = func(vs []searchindex.PassageVector) error {
				_, err := searchindex.WriteVectors(ctx, v.pool, v.profile, vs)
				return err
			}
		case "indexed":
			rng := rand.New(rand.NewPCG(1, 2))
			centroids := make([][]float32, searchindex.ListsFor(1_000_000))
			for i := range centroids {
				centroids[i] = vectortest.Noisy(rng, nil, dims, 1)
			}
			require.NoError(b, pgx.BeginFunc(ctx, v.pool, func(tx pgx.Tx) error {
				number, err := searchindex.BeginGeneration(ctx, tx, &searchindex.TrainedGeneration{Profile: v.profile, Passages: 1_000_000, Centroids: centroids, OutlierBelow: float32(math.Inf(-1))})
				if err != nil {
					return err
				}
				_, err = searchindex.FinishGeneration(ctx, tx, v.profile, number)
				return err
			}))
			v.write = func(vs []searchindex.PassageVector) error {
				_, err := ix.WriteVectors(ctx, v.pool, v.profile, vs)
				return err
			}
		}
		// The vectors, computed before anything is timed.
		for chunk := range chunks(v.ids, 500) {
			pending, err := searchindex.PassagesAwaitingVectors(ctx, v.pool, v.profile, chunk)
			require.NoError(b, err)
			for _, p := range pending {
				v.vectors[searchindex.PendingPassage{StoredEmailID: p.StoredEmailID, Ordinal: p.Ordinal}] = embedtest.Embed(p.Text, dims)
			}
		}
		_, err = v.pool.Exec(ctx, "CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
		require.NoError(b, err)
		variants = append(variants, v)
	}
	_, err = variants[0].pool.Exec(ctx, "SELECT pg_stat_statements_reset()")
	require.NoError(b, err)
	dbTime := func(v *bench) float64 {
		var ms float64
		require.NoError(b, v.pool.QueryRow(ctx, `
			SELECT coalesce(sum(total_exec_time + total_plan_time), 0) FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'`).Scan(&ms))
		return ms
	}
	// ratios holds, per variant, each slice's database time over before's.
	ratios := map[string][]float64{}
	const slices = 20
	for b.Loop() {
		for s := range slices {
			spent := map[string]float64{}
			for k := range variants {
				// Each slice in another order.
				v := variants[(s+k)%len(variants)]
				part := v.ids[s*len(v.ids)/slices : (s+1)*len(v.ids)/slices]
				before, start := dbTime(v), time.Now()
				for chunk := range chunks(part, batch) {
					pending, err := searchindex.PassagesAwaitingVectors(ctx, v.pool, v.profile, chunk)
					require.NoError(b, err)
					vs := make([]searchindex.PassageVector, len(pending))
					for i, p := range pending {
						vs[i] = searchindex.PassageVector{Passage: p, Vector: v.vectors[searchindex.PendingPassage{StoredEmailID: p.StoredEmailID, Ordinal: p.Ordinal}]}
					}
					require.NoError(b, v.write(vs))
					v.jobs++
				}
				v.wall += time.Since(start)
				spent[v.name] = dbTime(v) - before
			}
			for _, name := range []string{"pending", "indexed"} {
				ratios[name] = append(ratios[name], spent[name]/spent["before"])
			}
		}
	}
	perJob := map[string]float64{}
	for _, v := range variants {
		var ms float64
		require.NoError(b, v.pool.QueryRow(ctx, `
			SELECT sum(total_exec_time + total_plan_time) FROM pg_stat_statements
			WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) AND query NOT LIKE '%pg_stat_statements%'`).Scan(&ms))
		rows, err := v.pool.Query(ctx, `
			SELECT calls, round((total_exec_time + total_plan_time)::numeric, 1), left(regexp_replace(query, '\s+', ' ', 'g'), 80)
			FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database())
			  AND query NOT LIKE '%pg_stat_statements%'
			ORDER BY total_exec_time + total_plan_time DESC LIMIT 5`)
		require.NoError(b, err)
		for rows.Next() {
			var calls int64
			var total float64
			var query string
			require.NoError(b, rows.Scan(&calls, &total, &query))
			b.Logf("%s: %6d calls %9.1f ms  %s", v.name, calls, total, query)
		}
		require.NoError(b, rows.Err())
		perJob[v.name] = ms / float64(v.jobs)
		b.ReportMetric(ms/float64(v.jobs), v.name+"-db-ms/job")
		b.ReportMetric(float64(v.wall.Microseconds())/1000/float64(v.jobs), v.name+"-wall-ms/job")
	}
	b.ReportMetric(100*(perJob["pending"]/perJob["before"]-1), "pending-increase-%")
	b.ReportMetric(100*(perJob["indexed"]/perJob["before"]-1), "indexed-increase-%")
	// The median of the slices' ratios: a slice that met a burst of the
	// machine's other load moves it little.
	for _, name := range []string{"pending", "indexed"} {
		r := ratios[name]
		sort.Float64s(r)
		b.ReportMetric(100*(r[len(r)/2]-1), name+"-median-increase-%")
	}
}

// chunks cuts ids into slices of at most n.
func chunks(ids []uuid.UUID, n int) func(yield func([]uuid.UUID) bool) {
	return func(yield func([]uuid.UUID) bool) {
		for len(ids) > 0 {
			m := min(n, len(ids))
			if !yield(ids[:m]) {
				return
			}
			ids = ids[m:]
		}
	}
}

// seedMessages stores n generated messages (about 4 KB, 6 passages each)
// of account primary and returns their ids.
func seedMessages(tb testing.TB, ctx context.Context, pool *pgxpool.Pool, n int) []uuid.UUID {
	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(tb, err)
	tx, err := pool.Begin(ctx)
	require.NoError(tb, err)
	binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
	require.NoError(tb, err)
	ids := make([]uuid.UUID, n)
	for i := range ids {
		raw := mailgen.Message(31, i, 4000)
		rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
		ids[i], err = searchindex.WriteOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
			UIDValidity: 1, UID: uint32(i + 1), Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw}, &rec)
		require.NoError(tb, err)
	}
	require.NoError(tb, tx.Commit(ctx))
	_, err = pool.Exec(ctx, "VACUUM ANALYZE")
	require.NoError(tb, err)
	return ids
}

// beforeVectorIndexSQL returns a migrated database's vectors to the
// schema before the vector index.
const beforeVectorIndexSQL = `
	DROP TRIGGER stored_emails_passage_signatures_follow ON stored_emails;
	DROP INDEX ix_passage_signatures_lists;
	ALTER TABLE passage_signatures DROP COLUMN list_id, DROP COLUMN code, DROP COLUMN mail_folder_id, DROP COLUMN sent_at;
	CREATE INDEX ix_passage_vectors_profile ON passage_vectors (profile_id)`

// writeVectorsBefore is searchindex.WriteVectors as it was before the
// vector index.
func writeVectorsBefore(ctx context.Context, pool *pgxpool.Pool, profile int16, vs []searchindex.PassageVector) error {
	if len(vs) == 0 {
		return nil
	}
	ids := make([]uuid.UUID, len(vs))
	ords := make([]int16, len(vs))
	digests := make([][]byte, len(vs))
	sigs := make([]pgtype.Bits, len(vs))
	vecs := make([][]byte, len(vs))
	for i, v := range vs {
		ids[i], ords[i] = v.Passage.StoredEmailID, v.Passage.Ordinal
		d := sha256.Sum256([]byte(v.Passage.Text))
		digests[i] = d[:]
		sigs[i] = searchindex.Signature(v.Vector)
		vecs[i] = searchindex.EncodeVector(v.Vector)
	}
	_, err := pool.Exec(ctx, `
		WITH n AS (
			SELECT * FROM unnest($2::uuid[], $3::smallint[], $4::bytea[], $5::varbit[], $6::bytea[]) AS n(id, o, d, s, v)),
		stored AS (
			INSERT INTO passage_vectors (stored_email_id, ordinal, profile_id, vector)
			SELECT n.id, n.o, $1, n.v
			FROM n JOIN email_passages p ON p.stored_email_id = n.id AND p.ordinal = n.o AND sha256(convert_to(p.text, 'UTF8')) = n.d
			ON CONFLICT (stored_email_id, ordinal, profile_id) DO NOTHING
			RETURNING stored_email_id, ordinal)
		INSERT INTO passage_signatures (stored_email_id, ordinal, profile_id, signature)
		SELECT n.id, n.o, $1, n.s FROM stored JOIN n ON n.id = stored.stored_email_id AND n.o = stored.ordinal`,
		profile, ids, ords, digests, sigs, vecs)
	return err
}
