package searchindex

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// BackfillPosition returns, locking it for the caller's transaction, the
// last stored email the extraction backfill read, and uuid.Nil before its
// first batch.
func BackfillPosition(ctx context.Context, tx pgx.Tx) (uuid.UUID, error) {
	var position uuid.UUID
	err := tx.QueryRow(ctx, `SELECT last_stored_email_id FROM extraction_backfill_positions FOR UPDATE`).Scan(&position)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return uuid.Nil, fmt.Errorf("searchindex: read the backfill position: %w", err)
	}
	return position, nil
}

// AwaitingExtraction returns, in id order, at most limit stored emails past
// after that have raw MIME and no search document or no passages: mail
// stored before extraction existed, or before passages did.
func AwaitingExtraction(ctx context.Context, q Querier, after uuid.UUID, limit int) ([]uuid.UUID, error) {
	rows, err := q.Query(ctx, `
		SELECT e.id FROM stored_emails e
		WHERE e.id > $1
		  AND EXISTS (SELECT 1 FROM email_message_contents c WHERE c.stored_email_id = e.id)
		  AND (NOT EXISTS (SELECT 1 FROM email_search_documents d WHERE d.stored_email_id = e.id)
		       OR NOT EXISTS (SELECT 1 FROM email_passages p WHERE p.stored_email_id = e.id))
		ORDER BY e.id
		LIMIT $2`, after, limit)
	if err != nil {
		return nil, fmt.Errorf("searchindex: select emails awaiting extraction: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("searchindex: select emails awaiting extraction: %w", err)
	}
	return ids, nil
}

// SaveBackfillPosition records the last stored email the extraction
// backfill read, in the caller's transaction with the extractions it made.
func SaveBackfillPosition(ctx context.Context, q Querier, last uuid.UUID) error {
	if _, err := q.Exec(ctx, `
		INSERT INTO extraction_backfill_positions (last_stored_email_id) VALUES ($1)
		ON CONFLICT (singleton) DO UPDATE SET last_stored_email_id = excluded.last_stored_email_id, updated_at = now()`, last); err != nil {
		return fmt.Errorf("searchindex: record the backfill position: %w", err)
	}
	return nil
}
