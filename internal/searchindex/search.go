package searchindex

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
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
	// Alias, when set, narrows to one folder alias: the emails one of
	// whose live occurrences is in a folder of it (mailstore.InAlias), so
	// a message stored once for several folders is in each. An alias whose
	// folders hold occurrences of emails held elsewhere ranks every match
	// of the mail (mailfathom_search_shared), since the recency
	// strategies know each email by its holder's folder alone.
	Alias string
	// Limit bounds the hits. Default 20, at most 500 or Window.
	Limit int
	// Window is how many of the most recently sent matches are ranked.
	// Default RankWindow.
	Window int
	// Emails, when set, restricts the search to these messages (those of
	// them served in the accounts, account and alias asked for), and every
	// match among them is ranked, whatever Window says: a scope another
	// filter chose, a few thousand messages at most.
	Emails []uuid.UUID
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

// RankWindow is how many matches Search ranks: the most recently sent, of
// the mail the query may see. It is mailfathom_search's default window.
// Ranking reads each match's whole search vector, and collecting every
// match of a word found in much of a large mailbox costs a page per match,
// so a common word's search walks the mail newest first and stops at the
// window instead: tens of milliseconds at 100 000 messages rather than a
// second. Older matches are not returned.
const RankWindow = 1000

// Search returns the best matching messages, most relevant first (ties
// most recently sent first), among the RankWindow most recently sent
// matches of the mail served (served_stored_emails: no tombstone, and of
// the UID space each binding serves) in the accounts, account and alias
// asked for. The narrowing applies before the window. A query matching
// fewer messages ranks them all. It is the SQL function
// mailfathom_search, which the README documents for psql: both answer
// alike because they are the same.
func Search(ctx context.Context, q Querier, query Query) ([]Hit, error) {
	if query.Text == "" {
		return nil, errors.New("searchindex: empty query")
	}
	if len(query.Accounts) == 0 {
		return nil, nil
	}
	window := cmp.Or(query.Window, RankWindow)
	limit := query.Limit
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, max(500, window))
	statement := `
		SELECT stored_email_id, account_key, folder_alias, sent_at, sender, subject, rank
		FROM mailfathom_search($1::regconfig, $2, $3, nullif($4, ''), nullif($5, ''), $6, $7)`
	args := []any{query.Configuration, query.Text, query.Accounts, query.Account, query.Alias, limit, window}
	if query.Emails != nil {
		// The messages' documents, looked up by id: a few thousand at most,
		// so every match among them is ranked.
		statement = `
			SELECT e.id, a.account_key, f.alias, e.sent_at,
			       coalesce((SELECT p.address FROM email_participants p
			                 WHERE p.stored_email_id = e.id AND p.role = 'From' ORDER BY p.position LIMIT 1), ''),
			       coalesce(e.subject, ''), ts_rank(d.search_vector, websearch_to_tsquery($1::regconfig, $2)) AS rank
			FROM served_stored_emails e
			JOIN email_search_documents d ON d.stored_email_id = e.id
			JOIN mail_folders f ON f.id = e.mail_folder_id
			JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
			WHERE e.id = ANY($7::uuid[]) AND a.account_key = ANY($3)
			  AND ($4 = '' OR a.account_key = $4) AND ($5 = '' OR ` + mailstore.InAlias("e", "f", "$5") + `)
			  AND d.search_vector @@ websearch_to_tsquery($1::regconfig, $2)
			ORDER BY rank DESC, e.sent_at DESC NULLS LAST, e.id DESC
			LIMIT $6`
		args[6] = query.Emails
	}
	rows, err := q.Query(ctx, statement, args...)
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

// Strategy is how mailfathom_search finds a query's matches.
type Strategy struct {
	// Name is "index" (every match through the search vector's index,
	// for a rare query), "window" (only the matches among the newest
	// documents, the range widened until it holds RankWindow of them, for
	// a query in a few percent of the mail) or "recent" (the mail walked
	// newest first until RankWindow matches, for a common one).
	Name string
	// EstimatedMatches is the planner's estimate of the matching
	// documents, and Documents its count of documents, that chose it.
	EstimatedMatches, Documents float64
}

// SearchStrategy returns how a search for text would find its matches.
// The answer is the same either way; the strategy decides only its cost.
func SearchStrategy(ctx context.Context, q Querier, configuration, text string) (Strategy, error) {
	var s Strategy
	err := q.QueryRow(ctx, `SELECT strategy, estimated_matches, documents FROM mailfathom_search_strategy($1::regconfig, $2, $3)`,
		configuration, text, RankWindow).Scan(&s.Name, &s.EstimatedMatches, &s.Documents)
	if err != nil {
		return Strategy{}, fmt.Errorf("searchindex: search strategy: %w", err)
	}
	return s, nil
}
