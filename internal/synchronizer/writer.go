package synchronizer

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// writer writes occurrences into an open transaction, one statement each as
// they arrive (so no payload waits in memory for a batch), and commits the
// transaction in groups.
type writer struct {
	db            DB
	groupMessages int
	groupBytes    int64

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
	if _, err := mailstore.UpsertOccurrence(ctx, w.tx, o); err != nil {
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
