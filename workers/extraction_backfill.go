package workers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/jobs"
)

// ExtractionBackfillWorker runs one batch of the extraction backfill.
//
// A batch selects, past the committed position, stored messages that have
// raw MIME and no search document, reads them one at a time, writes the
// classification markers and metadata before the text derived from them,
// and commits all of it with the new position and the next batch's job.
// The position is what makes the walk finite: a message no reader can
// parse is counted, stepped over and left with its envelope document. A
// batch stops early once it has written enough text (the batch size bounds
// messages, the extraction bound characters, and the two multiply); the
// position is then the last message it read. The run ends itself when a
// batch finds nothing left.
type ExtractionBackfillWorker struct {
	river.WorkerDefaults[jobs.ExtractionBackfill]
	deps Dependencies
}

// backfillTextBudget bounds the text one batch writes, in multiples of
// MaxExtractedTextCharacters.
const backfillTextBudget = 4

// Timeout implements river.Worker.
func (w *ExtractionBackfillWorker) Timeout(*river.Job[jobs.ExtractionBackfill]) time.Duration {
	return 15 * time.Minute
}

// NextRetry implements river.Worker: a failed batch (the database briefly
// unavailable, say) is tried again after the backfill's interval; the
// committed position means nothing is redone.
func (w *ExtractionBackfillWorker) NextRetry(*river.Job[jobs.ExtractionBackfill]) time.Time {
	return w.deps.Now().Add(w.deps.Config.Backfill.Interval)
}

// Work implements river.Worker.
func (w *ExtractionBackfillWorker) Work(ctx context.Context, job *river.Job[jobs.ExtractionBackfill]) error {
	cfg := w.deps.Config
	logger := jobqueue.Logger(ctx, w.deps.Logger)
	if !cfg.Backfill.Enabled {
		logger.InfoContext(ctx, "extraction backfill is disabled; it stops")
		return nil
	}
	conn, release, err := w.deps.acquireWorkConn(ctx, job.ID)
	if err != nil {
		return fmt.Errorf("extraction backfill: %w", err)
	}
	defer release()

	limits := cfg.Sync.MimeLimits()
	client := river.ClientFromContext[pgx.Tx](ctx)
	start := w.deps.Now()
	var read, unreadable int
	var done bool
	err = pgx.BeginFunc(ctx, conn, func(tx pgx.Tx) error {
		read, unreadable, done = 0, 0, false
		var position uuid.UUID
		err := tx.QueryRow(ctx, `SELECT last_stored_email_id FROM extraction_backfill_positions FOR UPDATE`).Scan(&position)
		if err != nil && !errors.Is(err, pgx.ErrNoRows) {
			return fmt.Errorf("extraction backfill: read the position: %w", err)
		}
		rows, err := tx.Query(ctx, `
			SELECT e.id FROM stored_emails e
			WHERE e.id > $1
			  AND EXISTS (SELECT 1 FROM email_message_contents c WHERE c.stored_email_id = e.id)
			  AND NOT EXISTS (SELECT 1 FROM email_search_documents d WHERE d.stored_email_id = e.id)
			ORDER BY e.id
			LIMIT $2`, position, cfg.Backfill.BatchSize)
		if err != nil {
			return fmt.Errorf("extraction backfill: select a batch: %w", err)
		}
		ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
		if err != nil {
			return fmt.Errorf("extraction backfill: select a batch: %w", err)
		}
		if len(ids) == 0 {
			done = true
			_, err := river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		}

		textBudget := backfillTextBudget * cfg.Sync.MaxExtractedTextCharacters
		written := 0
		last := position
		for _, id := range ids {
			var raw []byte
			if err := tx.QueryRow(ctx, `SELECT raw_mime FROM email_message_contents WHERE stored_email_id = $1`, id).Scan(&raw); err != nil {
				return fmt.Errorf("extraction backfill: read raw MIME: %w", err)
			}
			rec := searchindex.Extract(id, raw, limits)
			raw = nil
			if err := searchindex.Write(ctx, tx, rec); err != nil {
				return err
			}
			read++
			if !rec.Readable {
				unreadable++
			}
			last = id
			written += len(rec.Text) + len(rec.Untrimmed)
			if written >= textBudget {
				break
			}
		}
		if _, err := tx.Exec(ctx, `
			INSERT INTO extraction_backfill_positions (last_stored_email_id) VALUES ($1)
			ON CONFLICT (singleton) DO UPDATE SET last_stored_email_id = excluded.last_stored_email_id, updated_at = now()`, last); err != nil {
			return fmt.Errorf("extraction backfill: commit the position: %w", err)
		}
		if read == len(ids) && len(ids) < cfg.Backfill.BatchSize {
			// A short batch read to its end: the walk reached the last
			// message awaiting extraction, so no successor is needed.
			done = true
			_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
			return err
		}
		next := jobs.ExtractionBackfill{BatchInRun: job.Args.BatchInRun + 1}
		opts := &river.InsertOpts{}
		if next.BatchInRun >= cfg.Backfill.MaxBatchesPerRun {
			next.BatchInRun = 0
			opts.ScheduledAt = w.deps.Now().Add(cfg.Backfill.Interval)
		}
		if _, err := client.InsertTx(ctx, tx, next, opts); err != nil {
			return fmt.Errorf("extraction backfill: schedule the next batch: %w", err)
		}
		_, err = river.JobCompleteTx[*riverpgxv5.Driver](ctx, tx, job)
		return err
	})
	if err != nil {
		return err
	}
	if done {
		logger.InfoContext(ctx, "extraction backfill finished: no stored message awaits extraction",
			slog.Int("read", read), slog.Int("unreadable", unreadable))
		return nil
	}
	logger.InfoContext(ctx, "extraction backfill batch committed",
		slog.Int("read", read), slog.Int("unreadable", unreadable), slog.Duration("duration", w.deps.Now().Sub(start)))
	return nil
}

// ScheduleExtractionBackfill inserts a backfill batch, now, unless one is
// already pending, scheduled or running, when the backfill is enabled. A
// deployment with nothing to backfill pays one query: the batch finds no
// work and ends.
func ScheduleExtractionBackfill(ctx context.Context, deps Dependencies, client *river.Client[pgx.Tx]) (bool, error) {
	if !deps.Config.Backfill.Enabled {
		return false, nil
	}
	inserted := false
	err := pgx.BeginFunc(ctx, deps.Pool, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1, 0)", scheduleLockNamespace+1); err != nil {
			return err
		}
		var pending bool
		if err := tx.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM river_job WHERE kind = $1
			AND state IN ('available', 'pending', 'retryable', 'running', 'scheduled'))`,
			jobs.ExtractionBackfill{}.Kind()).Scan(&pending); err != nil {
			return err
		}
		if pending {
			return nil
		}
		_, err := client.InsertTx(ctx, tx, jobs.ExtractionBackfill{}, nil)
		inserted = err == nil
		return err
	})
	if err != nil {
		return false, fmt.Errorf("schedule extraction backfill: %w", err)
	}
	return inserted, nil
}
