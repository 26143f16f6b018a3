package workers_test

import (
	"context"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/mimex"
	"github.com/mailfathom/mailfathom/workers"
)

// unembeddable is the marker of the text the test provider refuses.
const unembeddable = "UNEMBEDDABLE"

// winchLog is a message whose body, one passage, the provider refuses;
// its subject's passage it embeds.
const winchLog = "From: Harbour Master <master@example.test>\r\n" +
	"To: Crew <crew@example.test>\r\n" +
	"Subject: Winch log\r\n" +
	"Message-ID: <winch-1@example.test>\r\n" +
	"Date: Wed, 04 Jun 2025 09:00:00 +0000\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n\r\n" +
	"The winch log is " + unembeddable + " for the provider.\r\n"

// refused is how many passages of served messages are refused under model.
func (b *syncBundle) refused(t *testing.T, model string) int64 {
	t.Helper()
	p, _ := b.backlog(t, model)
	return p.Refused
}

// walkBackfill makes an embedding backfill walk now and waits for it and
// what it offers.
func (b *syncBundle) walkBackfill(t *testing.T) {
	t.Helper()
	_, err := workers.ScheduleEmbeddingBackfill(context.Background(), b.deps(t), b.client)
	require.NoError(t, err)
	b.waitIdle(t)
}

func TestEmbeddingRefusals(t *testing.T) {
	t.Parallel()

	t.Run("ARefusedPassageFailsOnlyItself", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupSync(t)
		srv := withEmbedding(t, b, "test-model", 1)
		srv.SetRefusal(embedtest.Refusal{Marker: unembeddable, Status: 413})
		b.user.Append("INBOX", []byte(winchLog), time.Now())
		for i := range 6 {
			b.user.Append("INBOX", mailgen.Message(27, i, 2000), time.Now())
		}
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "INBOX"), 7)
		offers := b.jobs(t, "embed_email")
		require.NotEmpty(t, offers)
		for _, j := range offers {
			require.Equal(t, "completed", j.state, "jobs:\n%s", b.jobHistory(t))
		}
		require.Positive(t, srv.Refused())

		passages := dbassert.PassageCount(t, b.pool)
		require.Equal(t, passages-1, b.vectorCount(t), "every passage but the refused one has its vector")
		refusals := dbassert.Refusals(t, b.pool)
		require.NotEmpty(t, refusals)
		require.Contains(t, refusals[0].Text, unembeddable)
		require.Equal(t, 413, refusals[0].Status)
		require.Zero(t, b.awaiting(t, "test-model"))
		require.EqualValues(t, 1, b.refused(t, "test-model"))
		require.NotContains(t, b.logs.String(), unembeddable, "no passage text in the log")

		// A walk of the backfill offers nothing: the refused passage does
		// not await a vector, and the provider is not asked about it again.
		requests := srv.Requests()
		b.walkBackfill(t)
		require.Len(t, b.jobs(t, "embed_email"), len(offers))
		require.Equal(t, requests, srv.Requests())
		unfinished := 0
		for _, j := range dbassert.Jobs(t, b.pool, "embedding_backfill") {
			if j.State != rivertype.JobStateCompleted {
				unfinished++
			}
		}
		require.Zero(t, unfinished, "the walk found nothing to offer and ended the chain; jobs:\n%s", b.jobHistory(t))

		// The status and the metrics say so.
		rep, err := status.Read(ctx, b.pool, workers.StatusOptions(b.deps(t)))
		require.NoError(t, err)
		require.NotNil(t, rep.Embedding)
		require.Zero(t, rep.Embedding.AwaitingMessages)
		require.EqualValues(t, 1, rep.Embedding.RefusedPassages)
		require.EqualValues(t, 1, *rep.Accounts[0].RefusedPassages)
		require.EqualValues(t, 0, *rep.Accounts[0].AwaitingVectors)
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(embedding.NewCollector(b.pool)))
		families, err := reg.Gather()
		require.NoError(t, err)
		gauges := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				if hasLabel(m, "model", "test-model") {
					gauges[f.GetName()] = m.GetGauge().GetValue()
				}
			}
		}
		require.Equal(t, map[string]float64{"mailfathom_embedding_passages_refused": 1, "mailfathom_embedding_messages_awaiting_vectors": 0}, gauges)
	})

	t.Run("ARequestRefusedAsAWholeFailsTheJobAndRecordsNothing", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		srv := withEmbedding(t, b, "test-model", 1)
		srv.SetRefusal(embedtest.Refusal{Marker: unembeddable, Status: 400})
		srv.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized})
		b.user.Append("INBOX", []byte(winchLog), time.Now())
		for i := range 2 {
			b.user.Append("INBOX", mailgen.Message(28, i, 1500), time.Now())
		}
		b.embeddingsUnwaited = true
		b.start(t)
		b.waitIdle(t)
		poll.Every(t, 50*time.Millisecond, time.Minute, "a refused key fails the job for good, as it always did", func() bool {
			jobs := b.jobs(t, "embed_email")
			for _, j := range jobs {
				if j.state != "cancelled" {
					return false
				}
			}
			return len(jobs) > 0
		}, func() string { return "jobs:\n" + b.jobHistory(t) })
		require.Contains(t, b.jobText(t), "[EmbeddingRequestRefused]")
		require.Empty(t, dbassert.Refusals(t, b.pool), "nothing is recorded as refused")
		require.Equal(t, int64(3), b.awaiting(t, "test-model"), "every message still awaits its vectors")
		require.Zero(t, srv.Refused(), "the request was refused as a whole, before any input was looked at")
		require.Equal(t, len(b.jobs(t, "embed_email")), srv.Requests(), "each job asked once: neither repeated nor split")
	})

	t.Run("ARewrittenPassageIsOfferedAgain", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupSync(t)
		srv := withEmbedding(t, b, "test-model", 1)
		srv.SetRefusal(embedtest.Refusal{Marker: unembeddable, Status: 422})
		b.user.Append("INBOX", []byte(winchLog), time.Now())
		b.start(t)
		b.waitIdle(t)
		require.EqualValues(t, 1, b.refused(t, "test-model"))
		require.Zero(t, b.awaiting(t, "test-model"))
		refusals := dbassert.Refusals(t, b.pool)
		require.NotEmpty(t, refusals)
		id := refusals[0].StoredEmailID

		// The message's text is read again, and its body now says
		// something else (as when extraction improves): the refusal was of
		// the old text and goes with it.
		raw := winchLog[:len(winchLog)-len("The winch log is "+unembeddable+" for the provider.\r\n")] +
			"The winch log shows both winches worn.\r\n"
		rec := searchindex.Extract(id, []byte(raw), mimex.DefaultLimits())
		require.NoError(t, searchindex.Write(ctx, b.pool, rec))
		require.Zero(t, b.refused(t, "test-model"))
		require.Equal(t, int64(1), b.awaiting(t, "test-model"))

		b.walkBackfill(t)
		require.Zero(t, b.awaiting(t, "test-model"), "jobs:\n%s", b.jobHistory(t))
		require.Zero(t, b.refused(t, "test-model"))
		require.Equal(t, dbassert.PassageCount(t, b.pool), b.vectorCount(t))
	})
}
