package embedding

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/jobs"
)

// Offer is what a write group does with the messages it stored, in its
// own transaction, when an embedding profile is configured: it queues
// their embed jobs while the backlog has room, and otherwise refuses the
// offer, counts it, and makes sure an embedding backfill walk is coming
// to offer them later. It never calls the provider: the embed jobs do.
//
// The backlog is every outstanding embed job — waiting to run, waiting
// for a retry, scheduled or running — since a provider that fails leaves
// its jobs retrying rather than queued; one count bounded by MaxBacklog.
type Offer struct {
	// Client inserts the jobs in the caller's transaction. Required.
	Client *river.Client[pgx.Tx]
	// MaxBacklog is MAILFATHOM_EMBEDDING_MAX_BACKLOG: the outstanding
	// embed jobs past which an offer is refused. Required.
	MaxBacklog int
	// BatchSize is MAILFATHOM_EMBEDDING_BATCH_SIZE: the most messages one
	// embed job carries. Required.
	BatchSize int
	// BackfillInterval is how long after a refused offer the walk that
	// completes it runs (MAILFATHOM_BACKFILL_INTERVAL). Required.
	BackfillInterval time.Duration
	// Now tells the time. Default: time.Now.
	Now func() time.Time
	// Metrics counts the offers. Optional.
	Metrics *Metrics
	// Logger receives counts only. Default: discard.
	Logger *slog.Logger
}

// Room is what the offers sharing it may still queue: the backlog is
// counted by the first, and each takes its jobs from what is left. The
// transactions of one write group share one, since none of them sees the
// jobs another queued before they commit. The zero value is uncounted.
type Room struct {
	counted bool
	left    int
}

// Make offers ids in tx, with a room of its own.
func (o Offer) Make(ctx context.Context, tx pgx.Tx, ids []uuid.UUID) error {
	return o.MakeWithin(ctx, tx, ids, &Room{})
}

// MakeWithin offers ids in tx within room: it queues as many of their
// embed jobs as the room holds, in order, and refuses the messages of the
// rest — they are counted refused, and a walk of the embedding backfill is
// made sure to come for them.
func (o Offer) MakeWithin(ctx context.Context, tx pgx.Tx, ids []uuid.UUID, room *Room) error {
	if !room.counted {
		backlog, err := jobqueue.OutstandingJobs(ctx, tx, jobs.EmbedEmail{}.Kind(), o.MaxBacklog)
		if err != nil {
			return err
		}
		room.counted, room.left = true, o.MaxBacklog-backlog
	}
	queue := Jobs(ids, o.BatchSize)
	n := min(len(queue), max(room.left, 0))
	if n > 0 {
		if _, err := o.Client.InsertManyTx(ctx, tx, queue[:n]); err != nil {
			return fmt.Errorf("offer for embedding: %w", err)
		}
		room.left -= n
	}
	accepted := min(len(ids), n*o.BatchSize)
	if accepted > 0 {
		o.Metrics.Offered(OfferAccepted, accepted)
	}
	refused := len(ids) - accepted
	if refused == 0 {
		return nil
	}
	// A walk that is about to end waits for this transaction, so it
	// cannot end without these messages (EnsureBackfill may have found
	// that walk waiting, and left it to them).
	if err := jobqueue.LockSchedulingShared(ctx, tx, jobqueue.ScheduleEmbeddingBackfill, jobqueue.RefusedOffers); err != nil {
		return err
	}
	o.Metrics.Offered(OfferRefused, refused)
	if o.Logger != nil {
		o.Logger.DebugContext(ctx, "embedding backlog full; offer refused", slog.Int("messages", refused))
	}
	return o.EnsureBackfill(ctx, tx)
}

// EnsureBackfill makes sure, in tx, that an embedding backfill walk is
// coming: when none is waiting to run it schedules one BackfillInterval
// from now. A step that is running does not count: it may have read which
// messages await vectors before tx commits, and end its walk without
// them. It never waits for the scheduling lock: a transaction holding it
// is scheduling a walk that runs after tx has committed.
func (o Offer) EnsureBackfill(ctx context.Context, tx pgx.Tx) error {
	locked, err := jobqueue.TryLockScheduling(ctx, tx, jobqueue.ScheduleEmbeddingBackfill, "")
	if err != nil || !locked {
		return err
	}
	waiting, err := jobqueue.Waiting(ctx, tx, jobs.EmbeddingBackfill{}.Kind())
	if err != nil || waiting {
		return err
	}
	now := time.Now
	if o.Now != nil {
		now = o.Now
	}
	_, err = o.Client.InsertTx(ctx, tx, jobs.EmbeddingBackfill{}, &river.InsertOpts{ScheduledAt: now().Add(o.BackfillInterval)})
	return err
}

// Jobs cuts ids into embed jobs of at most batch messages each.
func Jobs(ids []uuid.UUID, batch int) []river.InsertManyParams {
	var out []river.InsertManyParams
	for len(ids) > 0 {
		n := min(len(ids), batch)
		out = append(out, river.InsertManyParams{Args: jobs.EmbedEmail{EmailIDs: append([]uuid.UUID(nil), ids[:n]...)}})
		ids = ids[n:]
	}
	return out
}
