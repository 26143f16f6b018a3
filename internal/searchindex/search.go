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

// Search returns the best matching messages, most relevant first, among
// the mail served (served_stored_emails: no tombstone, and of the UID
// space each binding serves).
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
		WITH query AS (SELECT websearch_to_tsquery($1::regconfig, $2) AS tsq)
		SELECT e.id, a.account_key, f.alias, e.sent_at,
		       coalesce((SELECT p.address FROM email_participants p
		                 WHERE p.stored_email_id = e.id AND p.role = 'From' ORDER BY p.position LIMIT 1), ''),
		       coalesce(e.subject, ''),
		       ts_rank(d.search_vector, query.tsq)
		FROM query, email_search_documents d
		JOIN served_stored_emails e ON e.id = d.stored_email_id
		JOIN mail_folders f ON f.id = e.mail_folder_id
		JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE d.search_vector @@ query.tsq
		  AND a.account_key = ANY($3)
		  AND ($4 = '' OR a.account_key = $4)
		  AND ($5 = '' OR f.alias = $5)
		ORDER BY 7 DESC, e.sent_at DESC NULLS LAST
		LIMIT $6`,
		query.Configuration, query.Text, query.Accounts, query.Account, query.Alias, limit)
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
