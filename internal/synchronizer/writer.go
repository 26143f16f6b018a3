package synchronizer

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/extraction"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/mimex"
)

// writer writes occurrences into an open transaction, one round trip each
// as they arrive (so no payload waits in memory for a batch), and commits the
// transaction in groups.
type writer struct {
	db            DB
	groupMessages int
	groupBytes    int64
	extraction    mimex.Limits

	// lastReadable reports whether the last payload written was readable
	// MIME.
	lastReadable bool

	tx       pgx.Tx
	messages int
	bytes    int64
}

func (w *writer) write(ctx context.Context, o mailstore.Occurrence) error {
	if w.tx == nil {
		tx, err := w.db.Begin(ctx)
		if err != nil {
			return fmt.Errorf("synchronizer: begin: %w", err)
		}
		w.tx = tx
	}
	// The extraction runs before the write so the stored_emails row is
	// written once, and the message's statements go in one round trip.
	var rec *searchindex.Record
	if o.Raw != nil {
		r := extraction.Record(uuid.Nil, o.Raw, w.extraction)
		w.lastReadable = r.Readable
		rec = &r
	}
	if _, err := searchindex.WriteOccurrence(ctx, w.tx, o, rec); err != nil {
		return err
	}
	w.messages++
	w.bytes += int64(len(o.Raw))
	if w.messages >= w.groupMessages || w.bytes >= w.groupBytes {
		return w.commit(ctx)
	}
	return nil
}

func (w *writer) commit(ctx context.Context) error {
	if w.tx == nil {
		return nil
	}
	tx := w.tx
	w.tx, w.messages, w.bytes = nil, 0, 0
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("synchronizer: commit: %w", err)
	}
	return nil
}

func (w *writer) rollback(ctx context.Context) {
	if w.tx != nil {
		_ = w.tx.Rollback(context.WithoutCancel(ctx))
		w.tx = nil
	}
}
