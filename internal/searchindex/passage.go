package searchindex

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/mimex"
)

// SubjectOrdinal is the ordinal of a message's subject passage; its body
// passages follow from 1 in reading order.
const SubjectOrdinal = 0

// Passage is one bounded piece of a message's text, the unit an embedding
// is computed for.
type Passage struct {
	Ordinal int16
	Text    string
}

// derivePassages returns the passages of a message with subject and
// trimmed body text: the subject's (when it has one) and the body's
// (mimex.Passages), cleaned as the search document's text is.
func derivePassages(subject, text string) []Passage {
	var out []Passage
	if s := mimex.SubjectPassage(clean(subject)); s != "" {
		out = append(out, Passage{Ordinal: SubjectOrdinal, Text: s})
	}
	for i, p := range mimex.Passages(clean(text), mimex.MaxPassageChars, mimex.MaxPassages) {
		out = append(out, Passage{Ordinal: int16(i + 1), Text: p})
	}
	return out
}

func passageColumns(ps []Passage) ([]int16, []string) {
	ords, texts := make([]int16, len(ps)), make([]string, len(ps))
	for i, p := range ps {
		ords[i], texts[i] = p.Ordinal, p.Text
	}
	return ords, texts
}

// The passage statements replace a message's passages by the derived ones
// while keeping every passage whose text did not change, so the vectors
// computed for it (which cascade with it) are kept too: a message written
// again by an idempotent repeat is not embedded again.
const (
	deleteChangedPassagesSQL = `
		DELETE FROM email_passages p
		WHERE p.stored_email_id = $1
		  AND NOT EXISTS (SELECT 1 FROM unnest($2::smallint[], $3::text[]) AS n(o, t) WHERE n.o = p.ordinal AND n.t = p.text)`
	// A passage inserted puts its message in every profile's backlog, in
	// the same statement (owedSQL).
	insertPassagesSQL = `
		WITH inserted AS (
			INSERT INTO email_passages (stored_email_id, ordinal, text)
			SELECT $1, o, t FROM unnest($2::smallint[], $3::text[]) AS n(o, t)
			ON CONFLICT (stored_email_id, ordinal) DO NOTHING
			RETURNING stored_email_id)
		` + owedSQL
	// owedSQL follows a CTE named inserted, which returns the stored email
	// of each passage it inserted: each such message is owed vectors under
	// every profile. The row is written even when it exists, so a settling
	// of it that runs meanwhile (SettleBacklog) is waited for rather than
	// raced; rows are written in one order, so two writers wait rather than
	// deadlock.
	owedSQL = `
		INSERT INTO vector_backlog (profile_id, stored_email_id)
		SELECT pr.id, i.id
		FROM (SELECT DISTINCT stored_email_id AS id FROM inserted) i CROSS JOIN embedding_profiles pr
		ORDER BY i.id, pr.id
		ON CONFLICT (profile_id, stored_email_id) DO UPDATE SET changed_at = now()`
)

// writePassages replaces id's passages by ps in the caller's transaction.
func writePassages(ctx context.Context, q Querier, id uuid.UUID, ps []Passage) error {
	ords, texts := passageColumns(ps)
	if _, err := q.Exec(ctx, deleteChangedPassagesSQL, id, ords, texts); err != nil {
		return fmt.Errorf("searchindex: replace passages: %w", err)
	}
	if len(ps) == 0 {
		return nil
	}
	if _, err := q.Exec(ctx, insertPassagesSQL, id, ords, texts); err != nil {
		return fmt.Errorf("searchindex: insert passages: %w", err)
	}
	return nil
}

// insertEnvelopePassage gives id, when it has no passages, the passage of
// the subject its envelope reported.
func insertEnvelopePassage(ctx context.Context, q Querier, id uuid.UUID) error {
	var subject *string
	if err := q.QueryRow(ctx, `SELECT subject FROM stored_emails WHERE id = $1`, id).Scan(&subject); err != nil {
		return fmt.Errorf("searchindex: read an envelope subject: %w", err)
	}
	if subject == nil {
		return nil
	}
	s := mimex.SubjectPassage(clean(*subject))
	if s == "" {
		return nil
	}
	if _, err := q.Exec(ctx, `
		WITH inserted AS (
			INSERT INTO email_passages (stored_email_id, ordinal, text)
			SELECT $1, 0, $2 WHERE NOT EXISTS (SELECT 1 FROM email_passages WHERE stored_email_id = $1)
			RETURNING stored_email_id)
		`+owedSQL, id, s); err != nil {
		return fmt.Errorf("searchindex: insert an envelope passage: %w", err)
	}
	return nil
}

// PassagesOf returns id's passages in ordinal order.
func PassagesOf(ctx context.Context, q Querier, id uuid.UUID) ([]Passage, error) {
	rows, err := q.Query(ctx, `SELECT ordinal, text FROM email_passages WHERE stored_email_id = $1 ORDER BY ordinal`, id)
	if err != nil {
		return nil, fmt.Errorf("searchindex: read passages: %w", err)
	}
	ps, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Passage])
	if err != nil {
		return nil, fmt.Errorf("searchindex: read passages: %w", err)
	}
	return ps, nil
}
