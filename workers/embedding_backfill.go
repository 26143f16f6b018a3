package workers

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/jobs"
)

// maxBackfillOffer bounds the messages one embedding backfill step offers.
const maxBackfillOffer = 10_000

// embeddingWalkLock keys the lock under which an embedding backfill step
// counts the backlog's room and fills it.
const embeddingWalkLock = "walk"

// EmbeddingBackfillWorker runs one step of the embedding backfill
// (jobs.EmbeddingBackfill): it offers the served messages whose passages
// lack vectors under the active profile as far as the backlog has room,
// and commits the offer with its successor — or with none, which ends the
// chain, when a whole walk found nothing to offer. With no room in the
// backlog it snoozes for the backfill interval and walks on from where it
// was.
//
// Its room is MAX_BACKLOG less every outstanding embed job (available,
// retryable, scheduled or running), not only the available ones a pass
// counts: the messages it walks may be those of jobs still being retried,
// and counting only available jobs would offer them again at every step
// while a provider is down.
type EmbeddingBackfillWorker struct {
	river.WorkerDefaults[jobs.EmbeddingBackfill]
	deps Dependencies
}

// NextRetry implements river.Worker: a failed step (the database briefly
// unavailable) runs again after the backfill interval.
func (w *EmbeddingBackfillWorker) NextRetry(*river.Job[jobs.EmbeddingBackfill]) time.Time {
	return w.deps.Now().Add(w.deps.Config.Backfill.Interval)
}

// Work implements river.Worker.
func (w *EmbeddingBackfillWorker) Work(ctx context.Context, job *river.Job[jobs.EmbeddingBackfill]) error {
	logger := jobqueue.Logger(ctx, w.deps.Logger)
	if w.deps.Embedder == nil {
		logger.InfoContext(ctx, "no embedding profile is configured; the embedding backfill stops")
		return nil
	}
	profile, err := w.deps.profile.id(ctx, w.deps)
	if err != nil {
		return err
	}
	cfg := w.deps.Config.Embedding
	interval := w.deps.Config.Backfill.Interval
	client := river.ClientFromContext[pgx.Tx](ctx)
	offered, done, waiting := 0, false, false
	err = pgx.BeginFunc(ctx, w.deps.Pool, func(tx pgx.Tx) error {
		// Steps run on the embeddings queue, several at once: one at a
		// time counts the room and fills it, so two never fill the same
		// room twice. The lock is the walk's own, not the one an offer
		// tries when it schedules a walk.
		if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleEmbeddingBackfill, embeddingWalkLock); err != nil {
			return err
		}
		outstanding, err := jobqueue.OutstandingJobs(ctx, tx, jobs.EmbedEmail{}.Kind(), cfg.MaxBacklog)
		if err != nil {
			return err
		}
		next := job.Args
		if next.Profile != profile {
			// A walk begun under another profile starts over under this one.
			next = jobs.EmbeddingBackfill{Profile: profile}
		}
		walk := next
		var at time.Time
		room := cfg.MaxBacklog - outstanding
		if room <= 0 {
			// Nothing is written: the step snoozes below and comes back as
			// the same row, so a backlog that stays full adds no row to
			// River UI per interval.
			waiting = true
			return nil
		}
		limit := min(room*cfg.BatchSize, maxBackfillOffer)
		ids, err := searchindex.EmailsAwaitingVectors(ctx, tx, profile, walk.After, limit)
		if err != nil {
			return err
		}
		if len(ids) > 0 {
			if _, err := client.InsertManyTx(ctx, tx, embedding.Jobs(ids, cfg.BatchSize)); err != nil {
				return fmt.Errorf("embedding backfill: offer: %w", err)
			}
		}
		offered = len(ids)
		switch {
		case len(ids) == limit:
			next = jobs.EmbeddingBackfill{Profile: profile, After: ids[len(ids)-1], Offered: true}
		case walk.Offered || len(ids) > 0:
			// The walk reached the end having offered something: walk
			// again later, since an offered message may yet fail.
			next = jobs.EmbeddingBackfill{Profile: profile, After: uuid.Nil}
			at = w.deps.Now().Add(interval)
		default:
			// Before the walk ends, every offer refused meanwhile has
			// committed (it holds RefusedOffers shared until then): one
			// that found this step waiting left its messages to it, and
			// they may have been written after the walk read.
			if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleEmbeddingBackfill, jobqueue.RefusedOffers); err != nil {
				return err
			}
			late, err := searchindex.EmailsAwaitingVectors(ctx, tx, profile, uuid.Nil, 1)
			if err != nil {
				return err
			}
			if len(late) == 0 {
				done = true
				break
			}
			next = jobs.EmbeddingBackfill{Profile: profile, After: uuid.Nil}
			at = w.deps.Now().Add(interval)
		}
		if !done {
			// A step a refused offer scheduled meanwhile walks from the
			// start anyway: one chain at a time.
			waiting, err := jobqueue.Waiting(ctx, tx, jobs.EmbeddingBackfill{}.Kind())
			if err != nil {
				return err
			}
			if !waiting {
				if _, err := client.InsertTx(ctx, tx, next, &river.InsertOpts{ScheduledAt: at}); err != nil {
					return fmt.Errorf("embedding backfill: schedule the next step: %w", err)
				}
			}
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	switch {
	case done:
		logger.InfoContext(ctx, "embedding backfill finished: every served message has vectors under the active profile")
	case waiting:
		logger.DebugContext(ctx, "embedding backlog full; the backfill waits for room")
		return river.JobSnooze(interval)
	default:
		logger.InfoContext(ctx, "embedding backfill offered messages", slog.Int("messages", offered))
	}
	return nil
}

// ScheduleEmbeddingBackfill inserts an embedding backfill step, now, when
// an embedding profile is configured — or, when one is already pending or
// scheduled, makes it due now. It is what makes a newly configured (or changed)
// profile embed the mail stored before it, and what completes offers a
// full backlog refused while the process was down.
func ScheduleEmbeddingBackfill(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx]) (bool, error) {
	if deps.Embedder == nil {
		return false, nil
	}
	inserted := false
	err := pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
		if err := jobqueue.LockScheduling(ctx, tx, jobqueue.ScheduleEmbeddingBackfill, ""); err != nil {
			return err
		}
		pending, err := jobqueue.Pending(ctx, tx, jobs.EmbeddingBackfill{}.Kind(), "", 0)
		if err != nil {
			return err
		}
		if pending {
			// A step waiting out its interval walks now: the profile may
			// have changed since it was scheduled.
			_, err := jobqueue.MakeDue(ctx, tx, jobs.EmbeddingBackfill{}.Kind())
			return err
		}
		_, err = client.InsertTx(ctx, tx, jobs.EmbeddingBackfill{}, nil)
		inserted = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("schedule embedding backfill: %w", err)
	}
	return inserted, nil
}
