package workers_test

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/mimex"
	"github.com/mailfathom/mailfathom/workers"
)

// BenchmarkEmbedThroughput embeds 600 stored messages (about 6 passages
// each, 384 dimensions) through embed_email jobs on two workers against
// the test provider, at several MAILFATHOM_EMBEDDING_BATCH_SIZE values:
// messages, passages and jobs per second, from the first job's insertion
// to the last vector stored. The provider answers at once, so the figures
// are MailFathom's own cost (reading passages, the HTTP round trip,
// storing vectors), the ceiling a real model's latency divides. The
// refused variant has the provider refuse one passage of every hundredth
// message, which the jobs isolate by halving their requests: requests/job
// is what that costs.
//
//	go test ./workers/ -run XX -bench EmbedThroughput -benchtime 1x
func BenchmarkEmbedThroughput(b *testing.B) {
	const messages, dims = 600, 384
	for _, c := range []struct {
		name         string
		batch        int
		refusedEvery int // 0: none refused
	}{{"batch=1", 1, 0}, {"batch=16", 16, 0}, {"batch=64", 64, 0}, {"batch=16/refused=1%", 16, 100}} {
		batch := c.batch
		b.Run(c.name, func(b *testing.B) {
			ctx := context.Background()
			pool := dbtest.Pool(b)
			accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
			require.NoError(b, err)
			tx, err := pool.Begin(ctx)
			require.NoError(b, err)
			binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
			require.NoError(b, err)
			ids := make([]uuid.UUID, messages)
			for i := range ids {
				raw := mailgen.Message(31, i, 4000)
				if c.refusedEvery > 0 && i%c.refusedEvery == 0 {
					raw = append(raw, []byte(" "+benchRefusalMarker+"\r\n")...)
				}
				rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
				ids[i], err = searchindex.WriteOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
					UIDValidity: 1, UID: uint32(i + 1), Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw}, &rec)
				require.NoError(b, err)
			}
			require.NoError(b, tx.Commit(ctx))
			passages := dbassert.PassageCount(b, pool)
			refused := dbassert.PassagesContaining(b, pool, benchRefusalMarker)
			require.Equal(b, c.refusedEvery > 0, refused > 0)

			provider := embedtest.Start(b, embedtest.Options{Dimensions: dims})
			provider.SetRefusal(embedtest.Refusal{Marker: benchRefusalMarker, Status: 413})
			cfg, err := config.Load([]string{
				"MAILFATHOM_EMBEDDING_PROVIDER_URL=" + provider.URL,
				"MAILFATHOM_EMBEDDING_MODEL=test-model",
				"MAILFATHOM_EMBEDDING_DIMENSIONS=" + strconv.Itoa(dims),
				"MAILFATHOM_EMBEDDING_BATCH_SIZE=" + strconv.Itoa(batch),
				"MAILFATHOM_BACKFILL_ENABLED=false",
			})
			require.NoError(b, err)
			pipelines, err := outbound.NewRegistry(cfg.Resilience, nil, nil)
			require.NoError(b, err)
			embedder, err := embedding.NewClient(embedding.Options{URL: cfg.Embedding.ProviderURL,
				Profile: embedding.Profile{Model: cfg.Embedding.Model, Dimensions: dims}, Registry: pipelines})
			require.NoError(b, err)
			ws := river.NewWorkers()
			deps, err := workers.NewDependencies(workers.Dependencies{Pool: pool, Config: cfg, Resilience: pipelines, Embedder: embedder})
			require.NoError(b, err)
			failures, err := workers.Register(ws, deps)
			require.NoError(b, err)
			client, err := jobqueue.NewClient(jobqueue.Config{Pool: pool, Workers: ws,
				Middleware: []rivertype.WorkerMiddleware{failures}, QueueWorkers: map[string]int{jobs.QueueEmbeddings: 2}})
			require.NoError(b, err)
			require.NoError(b, client.Start(ctx))
			b.Cleanup(func() { require.NoError(b, jobqueue.Drain(context.Background(), client, 5*time.Second)) })

			var params []river.InsertManyParams
			for len(ids) > 0 {
				n := min(batch, len(ids))
				params = append(params, river.InsertManyParams{Args: jobs.EmbedEmail{EmailIDs: ids[:n]}})
				ids = ids[n:]
			}
			var elapsed time.Duration
			rounds := 0
			for b.Loop() {
				rounds++
				start := time.Now()
				_, err := client.InsertMany(ctx, params)
				require.NoError(b, err)
				poll.Every(b, 10*time.Millisecond, 5*time.Minute, "every passage but the refused ones has its vector", func() bool {
					return dbassert.VectorCount(b, pool, 0) == passages-refused
				}, func() string {
					return fmt.Sprintf("%d of %d vectors stored", dbassert.VectorCount(b, pool, 0), passages-refused)
				})
				elapsed = time.Since(start)
			}
			secs := elapsed.Seconds()
			b.ReportMetric(float64(messages)/secs, "msgs/s")
			b.ReportMetric(float64(passages)/secs, "passages/s")
			b.ReportMetric(float64(len(params))/secs, "jobs/s")
			b.ReportMetric(float64(provider.Requests())/float64(rounds*len(params)), "requests/job")
		})
	}
}

// benchRefusalMarker marks the passages the benchmark's provider refuses.
const benchRefusalMarker = "UNEMBEDDABLE"
