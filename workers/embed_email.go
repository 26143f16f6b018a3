package workers

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/forwardpass"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/jobs"
)

// EmbedEmailWorker embeds the passages of the messages a job names that
// await a vector under the active profile, and stores the vectors. The
// provider is called outside any transaction, under the
// AiProviderInvocation pipeline; a provider failure fails this job only
// (River repeats it on its own schedule), never a synchronization. An
// answer naming another model than the one the profile's vectors are of
// fails the job for good (EmbeddingModelChanged) with none of its vectors
// written (profileCache.answered).
//
// A passage the provider refuses for good (embedding.Client.EmbedEach
// isolates it) fails neither the job nor the passages sent with it: its
// refusal is recorded with the provider's status under the profile, every
// other passage gets its vector, and the refused one no longer awaits —
// no walk of the embedding backfill offers it again until its text
// changes.
type EmbedEmailWorker struct {
	river.WorkerDefaults[jobs.EmbedEmail]
	deps Dependencies
}

// Timeout implements river.Worker: a job of BATCH_SIZE messages makes up
// to BATCH_SIZE × 33 / 64 requests one after another, and at most 12 more
// per passage the provider refuses, each bounded by the pipeline's total
// timeout.
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
	vectors, refusals, answered, err := w.deps.Embedder.EmbedEach(ctx, texts)
	if err != nil {
		// River repeats this job a bounded number of times; a walk of the
		// embedding backfill is what offers these messages again should the
		// provider stay down longer than that.
		if serr := pgx.BeginFunc(ctx, w.deps.Pool, func(tx pgx.Tx) error {
			return w.deps.offer(river.ClientFromContext[pgx.Tx](ctx), logger).EnsureBackfill(ctx, tx)
		}); serr != nil {
			logger.WarnContext(ctx, "the embedding backfill could not be scheduled", slog.String("error", serr.Error()))
		}
		return fmt.Errorf("embed %d passages: %w", len(texts), err)
	}
	if err := w.deps.profile.answered(ctx, w.deps, logger, profile, answered); err != nil {
		// None of the answer's vectors is written, and none of its
		// refusals recorded: they are another model's. The failure is
		// terminal (the provider answers that model until it is
		// reconfigured), so no backfill is scheduled.
		return fmt.Errorf("embed %d passages: %w", len(texts), err)
	}
	pvs := make([]searchindex.PassageVector, 0, len(pending))
	for i, p := range pending {
		if vectors[i] != nil {
			pvs = append(pvs, searchindex.PassageVector{Passage: p, Vector: vectors[i]})
		}
	}
	n, err := w.deps.vectorIndex.WriteVectors(ctx, w.deps.Pool, profile, pvs)
	if err != nil {
		return err
	}
	w.deps.EmbeddingMetrics.Embedded(n)
	if err := w.recordRefusals(ctx, logger, profile, pending, refusals); err != nil {
		return err
	}
	logger.DebugContext(ctx, "passages embedded", slog.Int("messages", len(job.Args.EmailIDs)),
		slog.Int("passages", len(pending)), slog.Int("stored", n), slog.Int("refused", len(refusals)),
		slog.Duration("duration", w.deps.Now().Sub(start)))
	return nil
}

// recordRefusals records the passages the provider refused, so they no
// longer await a vector, and says so once per job: how many and with which
// statuses, never which text. A job that fails here is repeated, and asks
// the provider about the refused passages only.
func (w *EmbedEmailWorker) recordRefusals(ctx context.Context, logger *slog.Logger, profile int16, pending []searchindex.PendingPassage, refusals []embedding.Refusal) error {
	if len(refusals) == 0 {
		return nil
	}
	rs := make([]searchindex.PassageRefusal, len(refusals))
	var statuses []int
	for i, r := range refusals {
		rs[i] = searchindex.PassageRefusal{Passage: pending[r.Index], Status: r.Status}
		if !slices.Contains(statuses, r.Status) {
			statuses = append(statuses, r.Status)
		}
	}
	n, err := searchindex.RecordRefusals(ctx, w.deps.Pool, profile, rs)
	if err != nil {
		return err
	}
	logger.WarnContext(ctx, "the embedding provider refused passages; they are recorded as refused and not offered again until their text changes",
		slog.Int("refused", len(refusals)), slog.Int("recorded", n), slog.Any("statuses", statuses),
		slog.String("failure", embedding.FailureInputRefused))
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

// profileCache holds the active profile's id once it is recorded, and the
// model its vectors are of once an answer named one (that record never
// changes, so caching it is safe).
type profileCache struct {
	mu    sync.Mutex
	v     int16
	model string
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

// answered checks the model an answer names (model, "" for none) against
// the one the profile's vectors are of, recording it on the first answer
// that names one, and returns a *embedding.ModelChangedError when it is
// another (embedding.SameModel). An answer that names no model is
// accepted: there is nothing to compare. The first recorded model is not
// compared with the configured name: providers that echo the requested
// name (Ollama, vLLM, llama.cpp's server) answer it whatever they serve,
// and those that answer what they serve (text-embeddings-inference's model
// id, Azure's model behind a deployment name, OpenAI's versioned names)
// differ from it by design, so a difference is no evidence of mixed
// vectors; it is logged once, and the profile's vectors are that model's
// from then on.
func (c *profileCache) answered(ctx context.Context, d Dependencies, logger *slog.Logger, profile int16, model string) error {
	if model == "" {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.model == "" {
		recorded, err := searchindex.RecordAnsweredModel(ctx, d.Pool, profile, model)
		if err != nil {
			return err
		}
		c.model = recorded
		if configured := d.Embedder.Profile().Model; recorded == model && !embedding.SameModel(configured, model) {
			logger.InfoContext(ctx, "the embedding provider answers another model name than the one configured; the profile's vectors are recorded as that model's",
				slog.String("configured_model", configured), slog.String("answered_model", model))
		}
	}
	if !embedding.SameModel(c.model, model) {
		return &embedding.ModelChangedError{Recorded: c.model, Answered: model}
	}
	return nil
}

// embeddingOffer returns the offer a write group makes of what it stored
// (embedding.Offer), or nil without an embedding profile.
func (d Dependencies) embeddingOffer(client *river.Client[pgx.Tx], logger *slog.Logger) func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
	if d.Embedder == nil || client == nil {
		return nil
	}
	o := d.offer(client, logger)
	// One write group's transactions share the room the first counted:
	// none sees the jobs another queued before they commit. The offers of
	// one pass are made one after another, never at once.
	var group any
	var room embedding.Room
	return func(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
		if g := forwardpass.OfferGroup(ctx); g == nil || g != group {
			group, room = g, embedding.Room{}
		}
		return o.MakeWithin(ctx, tx, ids, &room)
	}
}

// offer is the process's embedding offer over client.
func (d Dependencies) offer(client *river.Client[pgx.Tx], logger *slog.Logger) embedding.Offer {
	cfg := d.Config
	return embedding.Offer{Client: client, MaxBacklog: cfg.Embedding.MaxBacklog, BatchSize: cfg.Embedding.BatchSize,
		BackfillInterval: cfg.Backfill.Interval, Now: d.Now, Metrics: d.EmbeddingMetrics, Logger: logger}
}
