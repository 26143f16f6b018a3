package dbassert

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// PassageCount counts the stored passages of every message.
func PassageCount(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "count the passages", `SELECT count(*) FROM email_passages`)
}

// MessagesWithPassages counts the stored emails that have passages.
func MessagesWithPassages(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "count the emails with passages", `SELECT count(DISTINCT stored_email_id) FROM email_passages`)
}

// PassagesContaining counts the passages whose text contains text.
func PassagesContaining(tb testing.TB, q Querier, text string) int {
	tb.Helper()
	return count(tb, q, "count the passages containing a text",
		`SELECT count(*) FROM email_passages WHERE strpos(text, $1) > 0`, text)
}

// VectorCount counts the stored passage vectors of profile, or of every
// profile when profile is 0.
func VectorCount(tb testing.TB, q Querier, profile int16) int {
	tb.Helper()
	return count(tb, q, fmt.Sprintf("count the vectors of profile %d", profile),
		`SELECT count(*) FROM passage_vectors WHERE $1 = 0 OR profile_id = $1`, profile)
}

// SignatureCount counts the stored passage signatures of profile.
func SignatureCount(tb testing.TB, q Querier, profile int16) int {
	tb.Helper()
	return count(tb, q, fmt.Sprintf("count the signatures of profile %d", profile),
		`SELECT count(*) FROM passage_signatures WHERE profile_id = $1`, profile)
}

// Refusal is a passage the embedding provider refused, with the text it
// refused and the status it answered.
type Refusal struct {
	StoredEmailID uuid.UUID
	Ordinal       int16
	Text          string
	Status        int
}

// Refusals returns every recorded refusal of a passage, under every
// profile, in message and passage order.
func Refusals(tb testing.TB, q Querier) []Refusal {
	tb.Helper()
	rows, err := q.Query(context.Background(), `
		SELECT r.stored_email_id, r.ordinal, p.text, r.status FROM passage_refusals r
		JOIN email_passages p ON p.stored_email_id = r.stored_email_id AND p.ordinal = r.ordinal
		ORDER BY r.stored_email_id, r.ordinal`)
	check(tb, err, "read the refused passages")
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Refusal])
	check(tb, err, "read the refused passages")
	return out
}

// CopyVectors stores under profile to a copy of every vector and
// signature stored under from, as if to's model had embedded every
// passage alike.
func CopyVectors(tb testing.TB, q Querier, from, to int16) {
	tb.Helper()
	exec(tb, q, "copy the vectors of a profile", `INSERT INTO passage_vectors (stored_email_id, ordinal, profile_id, vector)
		SELECT stored_email_id, ordinal, $1, vector FROM passage_vectors WHERE profile_id = $2`, to, from)
	exec(tb, q, "copy the signatures of a profile", `INSERT INTO passage_signatures (stored_email_id, ordinal, profile_id, signature, code)
		SELECT stored_email_id, ordinal, $1, signature, code FROM passage_signatures WHERE profile_id = $2`, to, from)
}

// ForgetVector removes the vectors of passage ordinal of the stored email
// id under every profile, as if it had never been embedded.
func ForgetVector(tb testing.TB, q Querier, id uuid.UUID, ordinal int16) {
	tb.Helper()
	exec(tb, q, "remove a passage's vectors",
		`DELETE FROM passage_vectors WHERE stored_email_id = $1 AND ordinal = $2`, id, ordinal)
}

// PassagesWithoutVectors counts the passages of served emails that have
// no vector under any profile.
func PassagesWithoutVectors(tb testing.TB, q Querier) int {
	tb.Helper()
	return count(tb, q, "count the passages without vectors", `
		SELECT count(*) FROM email_passages p JOIN served_stored_emails e ON e.id = p.stored_email_id
		WHERE NOT EXISTS (SELECT 1 FROM passage_vectors v WHERE v.stored_email_id = p.stored_email_id AND v.ordinal = p.ordinal)`)
}

// MessagesAwaitingVectors counts the served emails with a passage that
// has neither a vector nor a recorded refusal under the profile of model,
// read from the passages themselves rather than from the backlog the
// product keeps.
func MessagesAwaitingVectors(tb testing.TB, q Querier, model string) int {
	tb.Helper()
	return count(tb, q, fmt.Sprintf("count the emails awaiting vectors of model %q", model), `
		SELECT count(DISTINCT p.stored_email_id) FROM email_passages p
		JOIN served_stored_emails e ON e.id = p.stored_email_id
		WHERE NOT EXISTS (SELECT 1 FROM passage_vectors v JOIN embedding_profiles pr ON pr.id = v.profile_id
		                  WHERE v.stored_email_id = p.stored_email_id AND v.ordinal = p.ordinal AND pr.model = $1)
		  AND NOT EXISTS (SELECT 1 FROM passage_refusals r JOIN embedding_profiles pr ON pr.id = r.profile_id
		                  WHERE r.stored_email_id = p.stored_email_id AND r.ordinal = p.ordinal AND pr.model = $1)`, model)
}
