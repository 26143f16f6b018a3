package searchindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// DefaultCandidates is how many passages the signature scan of a semantic
// search keeps for re-ranking by their full vectors. Measured against an
// exact scan (internal/searchindex's benchmark), 400 keeps recall@10 at
// or above 0.95 for 100 000 passages of 384 dimensions.
const DefaultCandidates = 400

// SemanticQuery is a search by meaning: passages nearest to a query
// vector under one profile.
type SemanticQuery struct {
	// Profile is the active embedding profile; only its vectors are
	// compared. Required.
	Profile int16
	// Vector is the query's embedding under Profile, unit length.
	// Required.
	Vector []float32
	// Accounts, Account, Alias and Limit are as in Query.
	Accounts []string
	Account  string
	Alias    string
	Limit    int
	// Candidates is how many passages the signature scan keeps for
	// re-ranking. Default DefaultCandidates; at most 10 000.
	Candidates int
}

// The candidate selections of SemanticSearch: the passages whose
// signatures differ least from the query's ($2), $6 of them.
const (
	candidatesAll = `
		SELECT s.stored_email_id, s.ordinal
		FROM passage_signatures s
		WHERE s.profile_id = $1
		ORDER BY bit_count(s.signature # $2::varbit)
		LIMIT $6`
	candidatesNarrowed = `
		SELECT s.stored_email_id, s.ordinal
		FROM passage_signatures s
		JOIN served_stored_emails e ON e.id = s.stored_email_id
		JOIN mail_folders f ON f.id = e.mail_folder_id
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE s.profile_id = $1
		  AND a.account_key = ANY($3)
		  AND ($4 = '' OR a.account_key = $4)
		  AND ($5 = '' OR f.alias = $5)
		ORDER BY bit_count(s.signature # $2::varbit)
		LIMIT $6`
)

// SemanticHit is one message found by meaning.
type SemanticHit struct {
	StoredEmailID uuid.UUID
	Account       string
	Alias         string
	SentAt        *time.Time
	From          string
	Subject       string
	// Passage is the ordinal of the message's passage nearest to the
	// query, and Score its cosine similarity.
	Passage int16
	Score   float32
}

// SemanticSearch returns the served messages whose passages are nearest to
// query.Vector, best first, one hit per message (its best passage).
//
// It is two steps in one statement: the signature scan picks the
// query.Candidates passages whose sign bits differ least from the query's
// (bit_count(signature # query), a sequential scan of a narrow heap), and
// the candidates' full vectors are then compared exactly here. It is an
// approximation — a passage whose signature is far from the query's is
// never re-ranked — whose recall the benchmark measures.
func SemanticSearch(ctx context.Context, q Querier, query SemanticQuery) ([]SemanticHit, error) {
	if len(query.Vector) == 0 {
		return nil, errors.New("searchindex: empty query vector")
	}
	if len(query.Accounts) == 0 {
		return nil, nil
	}
	limit := query.Limit
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 500)
	n := min(max(cmp.Or(query.Candidates, DefaultCandidates), limit), 10_000)
	// Unnarrowed, the scan reads the signatures alone and the served and
	// account conditions apply to the candidates: joining every signature
	// to its message cost ten times the scan at 100 000 passages. Mail not
	// served (tombstoned, or of a removed account) is rare, and only takes
	// candidate places. Narrowed to an account or alias, the candidates are
	// chosen among its mail, so a small folder is not crowded out. The
	// candidates are MATERIALIZED and each is looked up by its id (the
	// LATERAL subquery, kept apart by OFFSET 0): left to itself, the
	// planner misjudged how much of the mailbox an account holds and
	// joined every message to the candidates, 2 s at 100 000 passages.
	candidates := candidatesAll
	if query.Account != "" || query.Alias != "" {
		candidates = candidatesNarrowed
	}
	rows, err := q.Query(ctx, `
		WITH candidates AS MATERIALIZED (`+candidates+`)
		SELECT c.stored_email_id, c.ordinal, v.vector, m.account_key, m.alias, m.sent_at, m.sender, m.subject
		FROM candidates c
		CROSS JOIN LATERAL (
			SELECT a.account_key, f.alias, e.sent_at,
			       coalesce((SELECT p.address FROM email_participants p
			                 WHERE p.stored_email_id = e.id AND p.role = 'From' ORDER BY p.position LIMIT 1), '') AS sender,
			       coalesce(e.subject, '') AS subject
			FROM served_stored_emails e
			JOIN mail_folders f ON f.id = e.mail_folder_id
			JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
			WHERE e.id = c.stored_email_id
			  AND a.account_key = ANY($3)
			  AND ($4 = '' OR a.account_key = $4)
			  AND ($5 = '' OR f.alias = $5)
			OFFSET 0) m
		JOIN passage_vectors v ON v.stored_email_id = c.stored_email_id AND v.ordinal = c.ordinal AND v.profile_id = $1`,
		query.Profile, Signature(query.Vector), query.Accounts, query.Account, query.Alias, n)
	if err != nil {
		return nil, fmt.Errorf("searchindex: semantic search: %w", err)
	}
	best := map[uuid.UUID]SemanticHit{}
	var vec []byte
	var h SemanticHit
	_, err = pgx.ForEachRow(rows, []any{&h.StoredEmailID, &h.Passage, &vec, &h.Account, &h.Alias, &h.SentAt, &h.From, &h.Subject}, func() error {
		score, err := dot(query.Vector, vec)
		if err != nil {
			return err
		}
		if b, ok := best[h.StoredEmailID]; !ok || score > b.Score {
			hit := h
			hit.Score = score
			best[h.StoredEmailID] = hit
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("searchindex: semantic search: %w", err)
	}
	return rankHits(best, limit), nil
}

// ExactSemanticSearch is SemanticSearch without the signature scan: every
// vector of the profile among the accounts is compared. It is the
// reference the fast search's recall is measured against, and far too
// slow for a large mailbox; it ignores Account, Alias and Candidates.
func ExactSemanticSearch(ctx context.Context, q Querier, query SemanticQuery) ([]SemanticHit, error) {
	limit := cmp.Or(query.Limit, 20)
	rows, err := q.Query(ctx, `
		SELECT v.stored_email_id, v.ordinal, v.vector
		FROM passage_vectors v
		JOIN served_stored_emails e ON e.id = v.stored_email_id
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE v.profile_id = $1 AND a.account_key = ANY($2)`, query.Profile, query.Accounts)
	if err != nil {
		return nil, fmt.Errorf("searchindex: exact semantic search: %w", err)
	}
	best := map[uuid.UUID]SemanticHit{}
	var h SemanticHit
	var vec []byte
	_, err = pgx.ForEachRow(rows, []any{&h.StoredEmailID, &h.Passage, &vec}, func() error {
		score, err := dot(query.Vector, vec)
		if err != nil {
			return err
		}
		if b, ok := best[h.StoredEmailID]; !ok || score > b.Score {
			hit := h
			hit.Score = score
			best[h.StoredEmailID] = hit
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("searchindex: exact semantic search: %w", err)
	}
	return rankHits(best, limit), nil
}

// rankHits orders hits best first (ties by id, so equal scores rank the
// same way every time) and keeps the first limit.
func rankHits(best map[uuid.UUID]SemanticHit, limit int) []SemanticHit {
	hits := make([]SemanticHit, 0, len(best))
	for _, b := range best {
		hits = append(hits, b)
	}
	slices.SortFunc(hits, func(a, b SemanticHit) int {
		if c := cmp.Compare(b.Score, a.Score); c != 0 {
			return c
		}
		return cmp.Compare(a.StoredEmailID.String(), b.StoredEmailID.String())
	})
	if len(hits) > limit {
		hits = hits[:limit]
	}
	return hits
}
