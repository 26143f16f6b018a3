package workers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/mimex"
)

const craneReport = "From: Harbour Master <master@example.test>\r\n" +
	"To: Crew <crew@example.test>\r\n" +
	"Subject: Crane inspection report\r\n" +
	"Message-ID: <crane-1@example.test>\r\n" +
	"Date: Tue, 03 Jun 2025 09:00:00 +0000\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n\r\n" +
	"The inspectors examined both harbour cranes and found the winches worn.\r\n"

const embedDims = 48

// withEmbedding gives b an embedding profile served by a test provider
// and returns the provider.
func withEmbedding(t *testing.T, b *syncBundle, model string, workers int) *embedtest.Server {
	t.Helper()
	srv := embedtest.Start(t, embedtest.Options{Dimensions: embedDims})
	b.embedding = config.Embedding{ProviderURL: srv.URL, Model: model, Dimensions: embedDims, BatchSize: 4, MaxBacklog: 1000}
	b.embedWorkers = workers
	// A walk that offered something walks again only after the interval,
	// which waitIdle does not wait for.
	b.env["MAILFATHOM_BACKFILL_INTERVAL"] = "1h"
	return srv
}

// backlog is model's backlog, and false before the profile is recorded.
func (b *syncBundle) backlog(t *testing.T, model string) (searchindex.ProfileBacklog, bool) {
	t.Helper()
	backlog, err := searchindex.AwaitingPerProfile(context.Background(), b.pool)
	require.NoError(t, err)
	for _, p := range backlog {
		if p.Model == model {
			return p, true
		}
	}
	return searchindex.ProfileBacklog{}, false
}

// awaiting is how many served messages await a vector under model.
func (b *syncBundle) awaiting(t *testing.T, model string) int64 {
	t.Helper()
	if p, ok := b.backlog(t, model); ok {
		return p.Awaiting
	}
	return int64(dbassert.MessagesWithPassages(t, b.pool))
}

// semantic searches by meaning under the running profile.
func (b *syncBundle) semantic(t *testing.T, text string) []searchindex.SemanticHit {
	t.Helper()
	ctx := context.Background()
	deps := b.deps(t)
	vs, _, err := deps.Embedder.Embed(ctx, []string{text})
	require.NoError(t, err)
	p := deps.Embedder.Profile()
	profile, err := searchindex.EnsureProfile(ctx, b.pool, p.Model, p.Dimensions)
	require.NoError(t, err)
	hits, err := searchindex.SemanticSearch(ctx, b.pool, searchindex.SemanticQuery{
		Profile: profile, Vector: vs[0], Accounts: []string{"primary"}, Limit: 5})
	require.NoError(t, err)
	return hits
}

func counter(t *testing.T, reg *prometheus.Registry, name, label, value string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	require.NoError(t, err)
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label == "" || hasLabel(m, label, value) {
				return m.GetCounter().GetValue()
			}
		}
	}
	return 0
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.GetLabel() {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

// vectorCount counts the stored vectors of every profile.
func (b *syncBundle) vectorCount(t *testing.T) int {
	t.Helper()
	return dbassert.VectorCount(t, b.pool, 0)
}

// makeDue makes the waiting jobs of kind due now.
func (b *syncBundle) makeDue(t *testing.T, kind string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
		_, err := jobqueue.MakeDue(ctx, tx, kind)
		return err
	}))
}

// waitEmbedded makes the waiting jobs of kind due, every 200ms, until no
// served message awaits a vector under test-model.
func (b *syncBundle) waitEmbedded(t *testing.T, kind string, within time.Duration) {
	t.Helper()
	poll.Every(t, 200*time.Millisecond, within, "every message embedded", func() bool {
		b.makeDue(t, kind)
		return b.awaiting(t, "test-model") == 0
	}, func() string {
		return fmt.Sprintf("%d messages await vectors; jobs:\n%slogs:\n%s", b.awaiting(t, "test-model"), b.jobHistory(t), b.logs.String())
	})
}

func TestEmbedding(t *testing.T) {
	t.Parallel()

	t.Run("ASynchronizedFolderIsEmbeddedAndFoundByMeaning", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		srv := withEmbedding(t, b, "test-model", 1)
		b.user.Append("INBOX", []byte(craneReport), time.Now())
		for i := range 12 {
			b.user.Append("INBOX", mailgen.Message(21, i, 2500), time.Now())
		}
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "INBOX"), 13)
		require.Zero(t, b.awaiting(t, "test-model"), "every synchronized message is embedded")
		require.Positive(t, srv.Inputs())
		require.Equal(t, float64(13), counter(t, b.metrics, "mailfathom_embedding_offered_messages_total", "outcome", "accepted"))
		require.Positive(t, counter(t, b.metrics, "mailfathom_embedding_passages_embedded_total", "", ""))

		// "inspecting cranes" shares no whole word with the report, so the
		// lexical index does not find it; its vector is still nearest.
		lexical, err := searchindex.Search(context.Background(), b.pool, searchindex.Query{
			Text: "inspecting cranes", Accounts: []string{"primary"}, Configuration: "simple"})
		require.NoError(t, err)
		require.Empty(t, lexical)
		hits := b.semantic(t, "inspecting cranes")
		require.NotEmpty(t, hits)
		require.Equal(t, "Crane inspection report", hits[0].Subject)
	})

	t.Run("AProviderOutageDelaysEmbeddingAndLeavesSynchronizationAlone", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		srv := withEmbedding(t, b, "test-model", 1)
		srv.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
		for i := range 10 {
			b.user.Append("INBOX", mailgen.Message(22, i, 2000), time.Now())
		}
		// River retries a failed embed job after about a second, and then
		// after 16: synchronization is waited for on its own, and then
		// every offer's failure, not River's backoff.
		b.embeddingsUnwaited = true
		b.start(t)
		b.waitIdle(t)
		out := b.lastPassOutput(t, "INBOX")
		require.Equal(t, float64(10), out["stored"], "the pass stored everything while the provider failed")
		poll.Every(t, 50*time.Millisecond, time.Minute, "every offer's embed job failed", func() bool {
			offers := dbassert.Jobs(t, b.pool, "embed_email")
			failed := 0
			for _, j := range offers {
				if len(j.Errors) > 0 && j.State != rivertype.JobStateRunning {
					failed++
				}
			}
			return len(offers) > 0 && failed == len(offers)
		}, func() string { return "jobs:\n" + b.jobHistory(t) + "logs:\n" + b.logs.String() })
		require.Equal(t, int64(10), b.awaiting(t, "test-model"))
		require.Positive(t, srv.Requests())

		// The provider recovers; the embed jobs River retries complete.
		srv.SetFault(embedtest.Fault{})
		b.waitEmbedded(t, "embed_email", time.Minute)
	})

	t.Run("RefusedOffersAreCompletedByTheBackfill", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		withEmbedding(t, b, "test-model", 0) // nothing drains the backlog
		b.embedding.MaxBacklog, b.embedding.BatchSize = 1, 2
		b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "4" // a write group per 4 messages
		for i := range 12 {
			b.user.Append("INBOX", mailgen.Message(23, i, 1500), time.Now())
		}
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "INBOX"), 12)
		accepted := counter(t, b.metrics, "mailfathom_embedding_offered_messages_total", "outcome", "accepted")
		refused := counter(t, b.metrics, "mailfathom_embedding_offered_messages_total", "outcome", "refused")
		require.Equal(t, float64(12), accepted+refused, "every stored message was offered")
		require.Positive(t, accepted, "the first group found room for one job")
		require.LessOrEqual(t, accepted, float64(2), "one job of at most two messages fits the backlog")
		require.Len(t, b.jobs(t, "embed_email"), 1, "the backlog's bound held")

		// With workers, the backfill offers what was refused as room appears.
		b.embedWorkers = 1
		b.start(t)
		b.waitEmbedded(t, "embedding_backfill", time.Minute)
	})

	t.Run("TheExtractionBackfillOffersWhatItWrites", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		withEmbedding(t, b, "test-model", 0) // nothing drains the backlog
		b.env["MAILFATHOM_SYNC_ENABLED"] = "false"
		b.storeUnextracted(t, 6, func(i int) []byte { return mailgen.Message(26, i, 1500) })
		b.start(t)
		b.waitIdle(t)
		require.Equal(t, 6, dbassert.MessagesWithPassages(t, b.pool), "the backfill wrote every message's passages")
		require.Equal(t, float64(6), counter(t, b.metrics, "mailfathom_embedding_offered_messages_total", "outcome", "accepted"),
			"the batch that wrote the passages offered them")
	})

	t.Run("AnOfferRefusedWhileAStepRunsIsWalkedAgain", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupSync(t)
		withEmbedding(t, b, "test-model", 0) // nothing drains the backlog
		b.embedding.MaxBacklog = 1
		client, err := jobqueue.NewInsertClient(b.pool)
		require.NoError(t, err)
		// An embed job no worker takes fills the backlog; a backfill step
		// is running, having read which messages await vectors before the
		// refused ones below were stored: it will find none and end its
		// walk.
		_, err = client.Insert(ctx, jobs.EmbedEmail{EmailIDs: []uuid.UUID{uuid.New()}}, nil)
		require.NoError(t, err)
		step, err := client.Insert(ctx, jobs.EmbeddingBackfill{}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		dbassert.MarkJobRunning(t, b.pool, step.Job.ID)
		for i := range 3 {
			b.user.Append("INBOX", mailgen.Message(25, i, 1500), time.Now())
		}
		b.start(t)
		b.waitIdle(t)
		require.Equal(t, float64(3), counter(t, b.metrics, "mailfathom_embedding_offered_messages_total", "outcome", "refused"))
		coming := dbassert.JobCount(t, b.pool, "embedding_backfill", rivertype.JobStateAvailable, rivertype.JobStateScheduled)
		require.Equal(t, 1, coming, "a running step does not stand for a walk of the refused offers; jobs:\n%s", b.jobHistory(t))
	})

	t.Run("TheBacklogBoundHoldsWhileTheProviderFails", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupSync(t)
		srv := withEmbedding(t, b, "test-model", 1)
		srv.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
		b.embedding.MaxBacklog, b.embedding.BatchSize = 2, 1
		b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "1" // an offer per message
		for i := range 2 {
			b.user.Append("INBOX", mailgen.Message(26, i, 1500), time.Now())
		}
		b.embeddingsUnwaited = true
		b.start(t)
		b.waitIdle(t)
		// The backlog's two jobs fail and wait for River's retry.
		poll.Every(t, 50*time.Millisecond, time.Minute, "the backlog's two embed jobs wait for their retry", func() bool {
			return dbassert.JobCount(t, b.pool, "embed_email", rivertype.JobStateRetryable) == 2
		}, func() string { return "jobs:\n" + b.jobHistory(t) })
		for i := 2; i < 8; i++ {
			b.user.Append("INBOX", mailgen.Message(26, i, 1500), time.Now())
		}
		b.runAgain(t)
		require.Len(t, b.stored(t, "INBOX"), 8)
		// Embed jobs waiting for a retry are the backlog as much as those
		// waiting to run: the failing provider holds no more than the bound.
		outstanding, err := jobqueue.OutstandingJobs(ctx, b.pool, "embed_email", 100)
		require.NoError(t, err)
		require.LessOrEqual(t, outstanding, 2, "jobs:\n%s", b.jobHistory(t))
		require.GreaterOrEqual(t, counter(t, b.metrics, "mailfathom_embedding_offered_messages_total", "outcome", "refused"), float64(6))

		// The provider recovers: the retries and the backfill embed it all.
		srv.SetFault(embedtest.Fault{})
		b.waitEmbedded(t, "embedding_backfill", 2*time.Minute)
	})

	t.Run("AFullBacklogSnoozesTheBackfillRatherThanAddingRows", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupSync(t)
		withEmbedding(t, b, "test-model", 1)
		b.embedding.MaxBacklog = 1
		// An embed job an hour away fills the backlog and is not run.
		client, err := jobqueue.NewInsertClient(b.pool)
		require.NoError(t, err)
		_, err = client.Insert(ctx, jobs.EmbedEmail{EmailIDs: []uuid.UUID{uuid.New()}}, &river.InsertOpts{ScheduledAt: time.Now().Add(time.Hour)})
		require.NoError(t, err)
		b.start(t)
		b.waitIdle(t)
		for range 3 {
			b.makeDue(t, "embedding_backfill")
			b.waitIdle(t)
		}
		steps := dbassert.Jobs(t, b.pool, "embedding_backfill")
		require.Len(t, steps, 1, "each step waiting for room is the same row; logs:\n%s", b.logs.String())
		require.Equal(t, rivertype.JobStateScheduled, steps[0].State)
	})

	t.Run("TwoStepsAtOnceFillTheRoomOnce", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupSync(t)
		b.env["MAILFATHOM_SYNC_ENABLED"] = "false"
		b.storeUnextracted(t, 12, func(i int) []byte { return mailgen.Message(27, i, 1500) })
		// The messages get their passages with no profile configured, so
		// nothing offers them.
		b.start(t)
		b.waitIdle(t)
		// Two steps due at once, on a queue of two workers, with room for
		// three embed jobs of one message each; the provider never
		// answers, so what they queue stays outstanding.
		srv := withEmbedding(t, b, "test-model", 2)
		srv.SetFault(embedtest.Fault{Kind: embedtest.Hang})
		b.embedding.MaxBacklog, b.embedding.BatchSize = 3, 1
		b.embeddingsUnwaited = true
		client, err := jobqueue.NewInsertClient(b.pool)
		require.NoError(t, err)
		for range 2 {
			_, err = client.Insert(ctx, jobs.EmbeddingBackfill{}, nil)
			require.NoError(t, err)
		}
		b.start(t)
		poll.Until(t, time.Minute, "both steps ran", func() (bool, string) {
			ran := 0
			for _, j := range dbassert.Jobs(t, b.pool, "embedding_backfill") {
				if j.State == rivertype.JobStateCompleted || j.State == rivertype.JobStateScheduled ||
					(j.State == rivertype.JobStateAvailable && j.Attempt > 0) {
					ran++
				}
			}
			return ran >= 2, fmt.Sprintf("%d steps ran", ran)
		})
		queued := dbassert.JobCount(t, b.pool, "embed_email")
		require.LessOrEqual(t, queued, 3, "the room is filled once; jobs:\n%s", b.jobHistory(t))
	})

	t.Run("AWalkEndsOnlyAfterTheOffersRefusedMeanwhile", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		b := setupSync(t)
		withEmbedding(t, b, "test-model", 1)
		b.env["MAILFATHOM_SYNC_ENABLED"] = "false"
		client, err := jobqueue.NewInsertClient(b.pool)
		require.NoError(t, err)
		b.start(t)
		b.waitIdle(t)
		// A step is waiting to walk, in a moment.
		_, err = client.Insert(ctx, jobs.EmbeddingBackfill{}, &river.InsertOpts{ScheduledAt: time.Now().Add(3 * time.Second)})
		require.NoError(t, err)
		// A write group stores a message and its offer is refused; it finds
		// the step waiting and leaves the message to it, then takes a while
		// to commit.
		accountID, err := mailstore.EnsureAccount(ctx, b.pool, "primary")
		require.NoError(t, err)
		var binding mailstore.Binding
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) error {
			binding, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
			return err
		}))
		group, err := b.pool.Begin(ctx)
		require.NoError(t, err)
		defer func() { _ = group.Rollback(ctx) }()
		raw := []byte(craneReport)
		rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
		id, err := searchindex.WriteOccurrence(ctx, group, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
			UIDValidity: 1, UID: 1, Size: int64(len(raw)), Raw: raw, Availability: mailstore.Available}, &rec)
		require.NoError(t, err)
		refusing := embedding.Offer{Client: client, MaxBacklog: 0, BatchSize: 4, BackfillInterval: time.Hour}
		require.NoError(t, refusing.Make(ctx, group, []uuid.UUID{id}))
		steps := dbassert.JobCount(t, group, "embedding_backfill")
		require.Equal(t, 2, steps, "the refused offer left the message to the waiting step (beside the walk the start ran)")

		// The step walks before the group commits, and finds nothing.
		poll.UntilTrue(t, time.Minute, "the step waits for the refused offer's transaction", func() bool {
			return dbassert.AdvisoryLocksAwaited(t, b.pool) > 0
		})
		require.NoError(t, group.Commit(ctx))
		poll.UntilTrue(t, time.Minute, "a walk is coming for the message", func() bool {
			return dbassert.JobCount(t, b.pool, "embedding_backfill", rivertype.JobStateAvailable, rivertype.JobStateScheduled) > 0
		})
		b.waitEmbedded(t, "embedding_backfill", time.Minute)
	})

	t.Run("RemovingAndAddingTheProfileBackLosesNothing", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		srv := withEmbedding(t, b, "test-model", 1)
		for i := range 5 {
			b.user.Append("INBOX", mailgen.Message(24, i, 1500), time.Now())
		}
		b.start(t)
		b.waitIdle(t)
		require.Zero(t, b.awaiting(t, "test-model"))
		vectors, inputs := b.vectorCount(t), srv.Inputs()

		// Without a profile, new mail is stored and nothing is offered.
		profile := b.embedding
		b.embedding = config.Embedding{}
		b.start(t)
		offers := len(b.jobs(t, "embed_email"))
		for i := 5; i < 8; i++ {
			b.user.Append("INBOX", mailgen.Message(24, i, 1500), time.Now())
		}
		b.runAgain(t)
		require.Len(t, b.stored(t, "INBOX"), 8)
		require.Len(t, b.jobs(t, "embed_email"), offers, "no offer without a profile")
		require.Equal(t, int64(3), b.awaiting(t, "test-model"))

		// The profile back: the backfill embeds the new mail only.
		b.embedding = profile
		b.start(t)
		b.waitIdle(t)
		require.Zero(t, b.awaiting(t, "test-model"))
		require.Greater(t, b.vectorCount(t), vectors)
		require.Less(t, srv.Inputs()-inputs, inputs, "the mail embedded before is not embedded again")

		// A changed model is a profile of its own: everything is embedded
		// again under it, and the earlier vectors stay.
		before := b.vectorCount(t)
		b.embedding.Model = "another-model"
		b.start(t)
		b.waitIdle(t)
		require.Zero(t, b.awaiting(t, "another-model"))
		require.Equal(t, 2*before, b.vectorCount(t))
		require.Positive(t, srv.Model("another-model"))
	})
}
