package workers

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/jobs"
)

// EmbedEmailWorker embeds the passages of the messages a job names that
// have no vector under the active profile, and stores the vectors. The
// provider is called outside any transaction, under the
// AiProviderInvocation pipeline; a provider failure fails this job only
// (River repeats it on its own schedule), never a synchronization.
type EmbedEmailWorker struct {
	river.WorkerDefaults[jobs.EmbedEmail]
	deps Dependencies
}

// Timeout implements river.Worker: a job of BATCH_SIZE messages makes up
// to BATCH_SIZE × 33 / 64 requests one after another, each bounded by the
// pipeline's total timeout.
func (w *EmbedEmailWorker) Timeout(*river.Job[jobs.EmbedEmail]) time.Duration {
	return 30 * time.Minute
}

// maxEmbedRetryDelay bounds the wait before an embed job that failed is
// attempted again: River's own schedule grows as the fourth power of the
// attempt (81 s before the fourth, over four minutes before the fifth), so
// a provider that came back after an outage would sit unused by the jobs
// waiting for it. The provider's pipeline (its circuit breaker among
// them) is what keeps retries from hammering one that is still down.
const maxEmbedRetryDelay = 30 * time.Second

// NextRetry implements river.Worker: River's schedule, capped at
// maxEmbedRetryDelay and jittered below it.
func (w *EmbedEmailWorker) NextRetry(job *river.Job[jobs.EmbedEmail]) time.Time {
	d := time.Until((&river.DefaultClientRetryPolicy{}).NextRetry(job.JobRow))
	if d > maxEmbedRetryDelay {
		d = maxEmbedRetryDelay/2 + rand.N(maxEmbedRetryDelay/2)
	}
	return w.deps.Now().Add(d)
}

// Work implements river.Worker.
func (w *EmbedEmailWorker) Work(ctx context.Context, job *river.Job[jobs.EmbedEmail]) error {
	logger := jobqueue.Logger(ctx, w.deps.Logger)
	if w.deps.Embedder == nil {
		logger.InfoContext(ctx, "no embedding profile is configured; the offer is dropped (the embedding backfill offers it again once one is)")
		return nil
	}
	profile, err := w.deps.profile.id(ctx, w.deps)
	if err != nil {
		return err
	}
	pending, err := searchindex.PassagesAwaitingVectors(ctx, w.deps.Pool, profile, job.Args.EmailIDs)
	if err != nil {
		return err
	}
	// A message with nothing left to embed (its vectors written by another
	// job, or its last passages removed) leaves the backlog here; those
	// embedded below leave it as their vectors are stored.
	if err := searchindex.SettleBacklog(ctx, w.deps.Pool, profile, withNothingPending(job.Args.EmailIDs, pending)); err != nil {
		return err
	}
	if len(pending) == 0 {
		return nil
	}
	texts := make([]string, len(pending))
	for i, p := range pending {
		texts[i] = p.Text
	}
	start := w.deps.Now()
	vectors, err := w.deps.Embedder.Embed(ctx, texts)
	if err != nil {
		// River repeats this job a bounded number of times; a walk of the
		// embedding backfill is what offers these messages again should the
		// provider stay down longer than that.
		if serr := pgx.BeginFunc(ctx, w.deps.Pool, func(tx pgx.Tx) error {
			return w.deps.ensureEmbeddingBackfill(ctx, tx, river.ClientFromContext[pgx.Tx](ctx))
		}); serr != nil {
			logger.WarnContext(ctx, "the embedding backfill could not be scheduled", slog.String("error", serr.Error()))
		}
		return fmt.Errorf("embed %d passages: %w", len(texts), err)
	}
	pvs := make([]searchindex.PassageVector, len(pending))
	for i, p := range pending {
		pvs[i] = searchindex.PassageVector{Passage: p, Vector: vectors[i]}
	}
	n, err := w.deps.vectorIndex.WriteVectors(ctx, w.deps.Pool, profile, pvs)
	if err != nil {
		return err
	}
	w.deps.EmbeddingMetrics.Embedded(n)
	logger.DebugContext(ctx, "passages embedded", slog.Int("messages", len(job.Args.EmailIDs)),
		slog.Int("passages", len(pending)), slog.Int("stored", n), slog.Duration("duration", w.deps.Now().Sub(start)))
	return nil
}

// withNothingPending returns the ids none of pending belongs to.
func withNothingPending(ids []uuid.UUID, pending []searchindex.PendingPassage) []uuid.UUID {
	has := make(map[uuid.UUID]bool, len(pending))
	for _, p := range pending {
		has[p.StoredEmailID] = true
	}
	var out []uuid.UUID
	for _, id := range ids {
		if !has[id] {
			out = append(out, id)
		}
	}
	return out
}

// profileCache holds the active profile's id once it is recorded.
type profileCache struct {
	mu sync.Mutex
	v  int16
}

// id returns the active profile's id, recording the profile on first use.
func (c *profileCache) id(ctx context.Context, d Dependencies) (int16, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.v != 0 {
		return c.v, nil
	}
	p := d.Embedder.Profile()
	id, err := searchindex.EnsureProfile(ctx, d.Pool, p.Model, p.Dimensions)
	if err != nil {
		return 0, err
	}
	c.v = id
	return id, nil
}

// embedJobs cuts ids into embed jobs of at most batch messages each.
func embedJobs(ids []uuid.UUID, batch int) []river.InsertManyParams {
	var out []river.InsertManyParams
	for len(ids) > 0 {
		n := min(len(ids), batch)
		out = append(out, river.InsertManyParams{Args: jobs.EmbedEmail{EmailIDs: append([]uuid.UUID(nil), ids[:n]...)}})
		ids = ids[n:]
	}
	return out
}

// embeddingOffer returns the folder pass's offer (forwardpass.Limits.Offer),
// or nil without an embedding profile. In the write group's own
// transaction it counts the backlog — the embed jobs waiting to run and
// those waiting for a retry or running, since a provider that fails
// leaves its jobs retrying rather than queued: one bounded count — and
// inserts the group's embed jobs while it holds fewer than MAX_BACKLOG; a full backlog refuses the offer at once, counts it, and
// makes sure an embedding backfill is coming to offer the messages later
// (without waiting for a scheduling lock another transaction holds: that
// one is scheduling it).
func (d Dependencies) embeddingOffer(client *river.Client[pgx.Tx], logger *slog.Logger) func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
	if d.Embedder == nil || client == nil {
		return nil
	}
	cfg := d.Config.Embedding
	return func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
		backlog, err := jobqueue.OutstandingJobs(ctx, tx, jobs.EmbedEmail{}.Kind(), cfg.MaxBacklog)
		if err != nil {
			return err
		}
		if backlog >= cfg.MaxBacklog {
			d.EmbeddingMetrics.Offered(embedding.OfferRefused, len(ids))
			logger.DebugContext(ctx, "embedding backlog full; offer refused", slog.Int("messages", len(ids)))
			return d.ensureEmbeddingBackfill(ctx, tx, client)
		}
		if _, err := client.InsertManyTx(ctx, tx, embedJobs(ids, cfg.BatchSize)); err != nil {
			return fmt.Errorf("offer for embedding: %w", err)
		}
		d.EmbeddingMetrics.Offered(embedding.OfferAccepted, len(ids))
		return nil
	}
}

// ensureEmbeddingBackfill makes sure, in tx, that an embedding backfill
// walk is coming: when none is waiting to run it schedules one after the
// backfill interval. A step that is running does not count: it may have
// read which messages await vectors before tx commits, and end its walk
// without them. It never waits for the scheduling lock: a transaction
// holding it is scheduling a walk that runs after tx has committed.
func (d Dependencies) ensureEmbeddingBackfill(ctx context.Context, tx pgx.Tx, client *river.Client[pgx.Tx]) error {
	locked, err := jobqueue.TryLockScheduling(ctx, tx, jobqueue.ScheduleEmbeddingBackfill, "")
	if err != nil || !locked {
		return err
	}
	waiting, err := jobqueue.Waiting(ctx, tx, jobs.EmbeddingBackfill{}.Kind())
	if err != nil || waiting {
		return err
	}
	_, err = client.InsertTx(ctx, tx, jobs.EmbeddingBackfill{}, &river.InsertOpts{ScheduledAt: d.Now().Add(d.Config.Backfill.Interval)})
	return err
}
