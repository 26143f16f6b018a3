package searchindex

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Query is a search over stored mail.
type Query struct {
	// Text is what the user typed, in web-search syntax ("quoted phrase",
	// -excluded, OR). Required.
	Text string
	// Accounts are the account keys that may be searched: the configured
	// ones, so a removed account's mail is no longer served. Required.
	Accounts []string
	// Account, when set, narrows to one of them.
	Account string
	// Alias, when set, narrows to one folder alias.
	Alias string
	// Limit bounds the hits. Default 20, at most 500.
	Limit int
	// Configuration is the text search configuration the query is parsed
	// with: the one compiled into the column (CompiledConfiguration).
	Configuration string
}

// Hit is one matching message.
type Hit struct {
	StoredEmailID uuid.UUID
	Account       string
	Alias         string
	SentAt        *time.Time
	From          string
	Subject       string
	Rank          float32
}

// RankWindow is how many matches Search ranks: the most recently sent.
// Ranking reads each match's whole search vector, so ranking every match
// of a word in most of a large mailbox would take seconds; the rest are
// not returned.
const RankWindow = 1000

// Search returns the best matching messages, most relevant first, among
// the RankWindow most recently sent matches of the mail served
// (served_stored_emails: no tombstone, and of the UID space each binding
// serves). A query matching fewer messages ranks them all.
func Search(ctx context.Context, q Querier, query Query) ([]Hit, error) {
	if query.Text == "" {
		return nil, errors.New("searchindex: empty query")
	}
	if len(query.Accounts) == 0 {
		return nil, nil
	}
	limit := query.Limit
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 500)
	rows, err := q.Query(ctx, `
		WITH query AS (SELECT websearch_to_tsquery($1::regconfig, $2) AS tsq),
		-- The index finds the matching documents first, whatever the
		-- planner guesses about the joins below (it estimates them from
		-- small tables that are rarely analyzed).
		matched AS MATERIALIZED (
			SELECT d.stored_email_id AS id
			FROM query, email_search_documents d
			WHERE d.search_vector @@ query.tsq),
		-- The most recent matches the caller may see, at most RankWindow.
		recent AS MATERIALIZED (
			SELECT e.id, a.account_key, f.alias, e.sent_at, e.subject
			FROM matched m
			JOIN served_stored_emails e ON e.id = m.id
			JOIN mail_folders f ON f.id = e.mail_folder_id
			JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
			WHERE a.account_key = ANY($3)
			  AND ($4 = '' OR a.account_key = $4)
			  AND ($5 = '' OR f.alias = $5)
			ORDER BY e.sent_at DESC NULLS LAST, e.id DESC
			LIMIT $7)
		SELECT r.id, r.account_key, r.alias, r.sent_at,
		       coalesce((SELECT p.address FROM email_participants p
		                 WHERE p.stored_email_id = r.id AND p.role = 'From' ORDER BY p.position LIMIT 1), ''),
		       coalesce(r.subject, ''),
		       ts_rank(d.search_vector, query.tsq)
		FROM query, recent r
		JOIN email_search_documents d ON d.stored_email_id = r.id
		ORDER BY 7 DESC, r.sent_at DESC NULLS LAST, r.id DESC
		LIMIT $6`,
		query.Configuration, query.Text, query.Accounts, query.Account, query.Alias, limit, RankWindow)
	if err != nil {
		return nil, fmt.Errorf("searchindex: search: %w", err)
	}
	hits, err := pgx.CollectRows(rows, func(r pgx.CollectableRow) (Hit, error) {
		var h Hit
		return h, r.Scan(&h.StoredEmailID, &h.Account, &h.Alias, &h.SentAt, &h.From, &h.Subject, &h.Rank)
	})
	if err != nil {
		return nil, fmt.Errorf("searchindex: search: %w", err)
	}
	return hits, nil
}
