package searchindex

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// EnsureProfile returns the id of the embedding profile (model,
// dimensions), creating it on first use. A profile created owes vectors
// for every message with passages: they form its backlog at once (one
// walk of the passages, when the profile is created and never again).
//
// Callers may race to create the same profile (serve's start and an
// embedding job, two replicas): the one whose insert waited on another's
// reads the row that one committed.
func EnsureProfile(ctx context.Context, q Querier, model string, dimensions int) (int16, error) {
	var id int16
	// At READ COMMITTED an insert that waited on a concurrent one for the
	// same key does nothing, and the statement's snapshot, taken before
	// that one committed, does not show its row either: a statement of
	// its own, with a snapshot of its own, does.
	err := q.QueryRow(ctx, `
		WITH inserted AS (
			INSERT INTO embedding_profiles (model, dimensions) VALUES ($1, $2)
			ON CONFLICT (model, dimensions) DO NOTHING RETURNING id),
		owed AS (
			INSERT INTO vector_backlog (profile_id, stored_email_id)
			SELECT i.id, p.stored_email_id FROM inserted i CROSS JOIN (SELECT DISTINCT stored_email_id FROM email_passages) p)
		SELECT id FROM inserted
		UNION ALL
		SELECT id FROM embedding_profiles WHERE model = $1 AND dimensions = $2
		LIMIT 1`, model, dimensions).Scan(&id)
	if errors.Is(err, pgx.ErrNoRows) {
		err = q.QueryRow(ctx, `SELECT id FROM embedding_profiles WHERE model = $1 AND dimensions = $2`,
			model, dimensions).Scan(&id)
	}
	if err != nil {
		return 0, fmt.Errorf("searchindex: record the embedding profile: %w", err)
	}
	return id, nil
}

// RecordAnsweredModel records model as the one the provider's answers name
// for the profile's vectors, unless one is recorded already, and returns
// the recorded one: model when this call or a concurrent one with the
// same model recorded it, another when the profile's vectors are of
// another model. Whether two names are the same model is the caller's to
// decide; it never changes a recorded name. Run it outside a transaction
// or in one at READ COMMITTED, so the read after a concurrent recording
// sees it.
func RecordAnsweredModel(ctx context.Context, q Querier, profile int16, model string) (string, error) {
	if _, err := q.Exec(ctx, `UPDATE embedding_profiles SET answered_model = $2 WHERE id = $1 AND answered_model IS NULL`,
		profile, model); err != nil {
		return "", fmt.Errorf("searchindex: record the embedding profile's answered model: %w", err)
	}
	return AnsweredModel(ctx, q, profile)
}

// AnsweredModel returns the model recorded for the profile's vectors
// (RecordAnsweredModel), "" while none is.
func AnsweredModel(ctx context.Context, q Querier, profile int16) (string, error) {
	var model string
	if err := q.QueryRow(ctx, `SELECT coalesce(answered_model, '') FROM embedding_profiles WHERE id = $1`,
		profile).Scan(&model); err != nil {
		return "", fmt.Errorf("searchindex: read the embedding profile's answered model: %w", err)
	}
	return model, nil
}

// PendingPassage is a passage that has no vector under a profile.
type PendingPassage struct {
	StoredEmailID uuid.UUID
	Ordinal       int16
	Text          string
}

// awaitsVector is the condition that passage p awaits a vector under the
// profile the SQL expression profile names: it has none, and the provider
// has not refused it (RecordRefusals).
func awaitsVector(profile string) string {
	return `NOT EXISTS (SELECT 1 FROM passage_vectors v
		                  WHERE v.stored_email_id = p.stored_email_id AND v.ordinal = p.ordinal AND v.profile_id = ` + profile + `)
		  AND NOT EXISTS (SELECT 1 FROM passage_refusals r
		                  WHERE r.stored_email_id = p.stored_email_id AND r.ordinal = p.ordinal AND r.profile_id = ` + profile + `)`
}

// PassagesAwaitingVectors returns, in email and ordinal order, the
// passages of the messages among ids that await a vector under profile:
// that have none, and that the provider has not refused.
//
// It does not ask whether a message is served yet. A message can be
// offered before it is: one of a UID space that replaces its folder's old
// one is served once that space has been walked to its end, and one whose
// occurrence left its folder is served again when the same message is
// stored in another. Skipping it then would leave it served later with no
// vector and nothing coming to give it one. A message erased meanwhile has
// no passages left.
func PassagesAwaitingVectors(ctx context.Context, q Querier, profile int16, ids []uuid.UUID) ([]PendingPassage, error) {
	rows, err := q.Query(ctx, `
		SELECT p.stored_email_id, p.ordinal, p.text
		FROM email_passages p
		WHERE p.stored_email_id = ANY($2)
		  AND `+awaitsVector("$1")+`
		ORDER BY p.stored_email_id, p.ordinal`, profile, ids)
	if err != nil {
		return nil, fmt.Errorf("searchindex: select passages awaiting vectors: %w", err)
	}
	ps, err := pgx.CollectRows(rows, pgx.RowToStructByPos[PendingPassage])
	if err != nil {
		return nil, fmt.Errorf("searchindex: select passages awaiting vectors: %w", err)
	}
	return ps, nil
}

// PassageVector is one passage's embedding.
type PassageVector struct {
	Passage PendingPassage
	Vector  []float32
}

// WriteVectors stores vs under profile, each with its code (its signature
// instead, for a profile of more than MaxCodedDimensions) and copies of
// its message's folder and sending date, in the vector index's pending
// list (VectorIndex.WriteVectors puts them in their lists).
// A vector is stored only while its passage still holds the text it was
// computed from (a passage rewritten in the meantime gets its own vector
// later) and only once: a second writer of the same passage changes
// nothing. It returns how many were stored.
func WriteVectors(ctx context.Context, q Querier, profile int16, vs []PassageVector) (int, error) {
	return writeVectors(ctx, q, profile, vs, nil)
}

// writeVectors is WriteVectors putting each vector in its nearest list of
// g (nil: pending). A list is kept only while g is the newest generation
// of the profile's index as the statement reads it, so a passage meant for
// a generation a build has since begun to replace is pending instead, for
// the build to assign. The read takes no lock: a build that begins while
// the statement runs may still see it commit into the older generation,
// and such a passage lies below the live generations' lists once the
// build is done, where every search reads it as it reads the pending list
// and the index's next check assigns it.
func writeVectors(ctx context.Context, q Querier, profile int16, vs []PassageVector, g *generation) (int, error) {
	if len(vs) == 0 {
		return 0, nil
	}
	ps := make([]PendingPassage, len(vs))
	sigs := make([]pgtype.Bits, len(vs))
	vecs := make([][]byte, len(vs))
	floats := make([][]float32, len(vs))
	for i, v := range vs {
		ps[i] = v.Passage
		sigs[i] = Signature(v.Vector)
		vecs[i] = EncodeVector(v.Vector)
		floats[i] = v.Vector
	}
	ids, ords, digests := passageKeys(ps)
	lists := assignListsExact(g, floats)
	codes := make([][]byte, len(vs))
	if len(vs[0].Vector) <= MaxCodedDimensions {
		// A coded passage is never ranked by its signature.
		codes = codesOf(floats)
		clear(sigs)
	}
	newest := int16(0)
	if g != nil {
		newest = g.number
	}
	tag, err := q.Exec(ctx, `
		WITH n AS (
			SELECT * FROM unnest($2::uuid[], $3::smallint[], $4::bytea[], $5::varbit[], $6::bytea[], $7::integer[], $8::bytea[])
				AS n(id, o, d, s, v, l, c)),
		live AS (
			SELECT greatest(i.serving, i.building) = $9 AND $9 > 0 AS current
			FROM vector_indexes i WHERE i.profile_id = $1),
		stored AS (
			INSERT INTO passage_vectors (stored_email_id, ordinal, profile_id, vector)
			SELECT n.id, n.o, $1, n.v
			FROM n JOIN email_passages p ON p.stored_email_id = n.id AND p.ordinal = n.o AND sha256(convert_to(p.text, 'UTF8')) = n.d
			ON CONFLICT (stored_email_id, ordinal, profile_id) DO NOTHING
			RETURNING stored_email_id, ordinal)
		INSERT INTO passage_signatures (stored_email_id, ordinal, profile_id, signature, list_id, code, mail_folder_id, sent_at)
		SELECT n.id, n.o, $1, n.s, CASE WHEN coalesce((SELECT current FROM live), false) THEN n.l ELSE 0 END,
		       n.c, e.mail_folder_id, e.sent_at
		FROM stored JOIN n ON n.id = stored.stored_email_id AND n.o = stored.ordinal
		JOIN stored_emails e ON e.id = n.id`,
		profile, ids, ords, digests, sigs, vecs, lists, codes, newest)
	if err != nil {
		return 0, fmt.Errorf("searchindex: store vectors: %w", err)
	}
	if err := SettleBacklog(ctx, q, profile, ids); err != nil {
		return 0, err
	}
	return int(tag.RowsAffected()), nil
}

// EmailsAwaitingVectors returns, in id order, at most limit messages past
// after with at least one passage awaiting a vector under profile
// (PassagesAwaitingVectors) that are served or are to be: every message
// not tombstoned — including those of a UID space its folder does not
// serve yet — and every one another folder's occurrence serves.
//
// It reads the passages themselves, not the backlog, and adds to the
// backlog any message it finds missing there (one whose passages were
// written while its profile was being created), so the walk is also what
// keeps the backlog whole.
func EmailsAwaitingVectors(ctx context.Context, q Querier, profile int16, after uuid.UUID, limit int) ([]uuid.UUID, error) {
	rows, err := q.Query(ctx, `
		WITH found AS (
			SELECT e.id FROM stored_emails e
			WHERE e.id > $2 AND e.shared_email_id IS NULL
			  AND (e.remote_expunge_observed_at IS NULL
			       OR EXISTS (SELECT 1 FROM served_stored_emails s WHERE s.id = e.id))
			  AND EXISTS (SELECT 1 FROM email_passages p
			              WHERE p.stored_email_id = e.id
			                AND `+awaitsVector("$1")+`)
			ORDER BY e.id
			LIMIT $3),
		owed AS (
			INSERT INTO vector_backlog (profile_id, stored_email_id)
			SELECT $1, id FROM found
			ON CONFLICT (profile_id, stored_email_id) DO NOTHING)
		SELECT id FROM found ORDER BY id`, profile, after, limit)
	if err != nil {
		return nil, fmt.Errorf("searchindex: select emails awaiting vectors: %w", err)
	}
	ids, err := pgx.CollectRows(rows, pgx.RowTo[uuid.UUID])
	if err != nil {
		return nil, fmt.Errorf("searchindex: select emails awaiting vectors: %w", err)
	}
	return ids, nil
}

// FindProfile returns the id of the embedding profile (model, dimensions)
// and whether it is recorded. Unlike EnsureProfile it never records one,
// so a read-only caller (the status view) leaves the database as it is.
func FindProfile(ctx context.Context, q Querier, model string, dimensions int) (int16, bool, error) {
	var id int16
	err := q.QueryRow(ctx, `SELECT id FROM embedding_profiles WHERE model = $1 AND dimensions = $2`,
		model, dimensions).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("searchindex: find the embedding profile: %w", err)
	}
	return id, true, nil
}

// Signature is the binary quantization of v: bit i is set when v[i] > 0.
// The Hamming distance of two signatures approximates the angle between
// their vectors, which is what makes the signature scan a fast first cut.
func Signature(v []float32) pgtype.Bits {
	b := make([]byte, (len(v)+7)/8)
	for i, x := range v {
		if x > 0 {
			b[i/8] |= 0x80 >> (i % 8)
		}
	}
	return pgtype.Bits{Bytes: b, Len: int32(len(v)), Valid: true}
}

// EncodeVector is v as stored: little-endian float32.
func EncodeVector(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// errVectorLength is a stored vector whose length is not a multiple of 4.
var errVectorLength = errors.New("searchindex: a stored vector has a length that is not a whole number of float32")

// dot is the dot product of q and the stored vector b (the cosine, both
// being unit length); b shorter than q counts as zero beyond its end.
func dot(q []float32, b []byte) (float32, error) {
	if len(b)%4 != 0 {
		return 0, errVectorLength
	}
	var s float32
	for i := 0; i < len(q) && 4*i < len(b); i++ {
		s += q[i] * math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return s, nil
}

// EmailVector returns the normalized mean of the vectors of the message
// id's passages under profile — one vector standing for the whole message,
// what a search for similar mail starts from — or nil when the message is
// not served in accounts or has no vector under profile.
func EmailVector(ctx context.Context, q Querier, profile int16, accounts []string, id uuid.UUID) ([]float32, error) {
	rows, err := q.Query(ctx, `
		SELECT v.vector FROM served_stored_emails e
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		JOIN passage_vectors v ON v.stored_email_id = e.id AND v.profile_id = $1
		WHERE e.id = $2 AND a.account_key = ANY($3)`, profile, id, accounts)
	if err != nil {
		return nil, fmt.Errorf("searchindex: read a message's vectors: %w", err)
	}
	var sum []float64
	var raw []byte
	_, err = pgx.ForEachRow(rows, []any{&raw}, func() error {
		v, err := DecodeVector(raw)
		if err != nil {
			return err
		}
		if sum == nil {
			sum = make([]float64, len(v))
		}
		for i := range min(len(v), len(sum)) {
			sum[i] += float64(v[i])
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("searchindex: read a message's vectors: %w", err)
	}
	if sum == nil {
		return nil, nil
	}
	var norm float64
	for _, x := range sum {
		norm += x * x
	}
	out := make([]float32, len(sum))
	if norm == 0 {
		return out, nil
	}
	norm = math.Sqrt(norm)
	for i, x := range sum {
		out[i] = float32(x / norm)
	}
	return out, nil
}

// Profile is one recorded embedding profile.
type Profile struct {
	ID         int16
	Model      string
	Dimensions int
	// AnsweredModel is the model the provider's answers name for its
	// vectors (RecordAnsweredModel); "" while none is recorded.
	AnsweredModel string
}

// Profiles returns every recorded embedding profile, in id order.
func Profiles(ctx context.Context, q Querier) ([]Profile, error) {
	rows, err := q.Query(ctx, `SELECT id, model, dimensions, coalesce(answered_model, '') FROM embedding_profiles ORDER BY id`)
	if err != nil {
		return nil, fmt.Errorf("searchindex: list the embedding profiles: %w", err)
	}
	out, err := pgx.CollectRows(rows, pgx.RowToStructByPos[Profile])
	if err != nil {
		return nil, fmt.Errorf("searchindex: list the embedding profiles: %w", err)
	}
	return out, nil
}

// PruneVectors removes at most limit of the profile's vectors (and their
// signatures) in one statement, and returns how many it removed: a
// profile no longer active is pruned in bounded batches, each its own
// transaction, so nothing else waits long behind one. It finds the
// vectors through the lists index, whose range the profile leads.
func PruneVectors(ctx context.Context, q Querier, profile int16, limit int) (int, error) {
	tag, err := q.Exec(ctx, `
		DELETE FROM passage_vectors v
		USING (SELECT s.stored_email_id, s.ordinal FROM passage_signatures s WHERE s.profile_id = $1 LIMIT $2) d
		WHERE v.stored_email_id = d.stored_email_id AND v.ordinal = d.ordinal AND v.profile_id = $1`, profile, limit)
	if err != nil {
		return 0, fmt.Errorf("searchindex: prune vectors: %w", err)
	}
	return int(tag.RowsAffected()), nil
}

// DropProfile removes the profile's record and its vector index, once
// PruneVectors has removed its vectors (any left go with it, in one
// statement).
func DropProfile(ctx context.Context, q Querier, profile int16) error {
	if _, err := q.Exec(ctx, `DELETE FROM embedding_profiles WHERE id = $1`, profile); err != nil {
		return fmt.Errorf("searchindex: drop the embedding profile: %w", err)
	}
	return nil
}
