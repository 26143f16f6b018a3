package mcpserver

import (
	"context"
	"errors"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

type searchEmailsIn struct {
	Query string `json:"query" jsonschema:"what to look for: words, a \"quoted phrase\", -excluded words, OR; with mode semantic or hybrid also a description in plain language"`
	Mode  string `json:"mode,omitempty" jsonschema:"lexical (the words), semantic (the meaning) or hybrid (both); default hybrid when the server has an embedding profile, else lexical"`
	filters
	Limit int `json:"limit,omitempty" jsonschema:"at most this many messages (default and upper bound: the server's MAILFATHOM_MCP_MAX_RESULTS)"`
}

type searchEmailsOut struct {
	Mode   string     `json:"mode" jsonschema:"the mode the search ran in"`
	Emails []emailOut `json:"emails" jsonschema:"the matches, best first"`
}

// searchDepth is how many hits a search with narrowing filters ranks
// before the filters narrow them: the search's own bound.
const searchDepth = 500

func (s *server) addSearchTool(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:  "search_emails",
		Title: "Search emails",
		Description: "Searches the stored mail by its words (lexical), by meaning (semantic) or both (hybrid), best matches first, " +
			"narrowed by the same filters as list_emails. By its words it ranks the 1 000 most recently sent matches of the account and alias asked for.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.searchEmails)
}

func (s *server) searchEmails(ctx context.Context, in searchEmailsIn) (searchEmailsOut, int, error) {
	text := strings.TrimSpace(in.Query)
	if text == "" {
		return searchEmailsOut{}, 0, refusef("query is required: the words or the description to search for")
	}
	mode := mailsearch.Mode(strings.ToLower(strings.TrimSpace(in.Mode)))
	if mode == "" {
		mode = s.Searcher.DefaultMode()
	}
	f, err := s.emailFilter(ctx, in.filters)
	if err != nil {
		return searchEmailsOut{}, 0, err
	}
	limit := s.limit(in.Limit)
	depth := limit
	if in.narrows() {
		depth = searchDepth
	}
	hits, err := s.Searcher.Search(ctx, mailsearch.Request{Text: text, Mode: mode, Account: f.Account, Alias: f.Alias, Limit: depth})
	switch {
	case errors.Is(err, mailsearch.ErrUnknownMode):
		return searchEmailsOut{}, 0, refusef("mode must be lexical, semantic or hybrid")
	case errors.Is(err, mailsearch.ErrNoProfile):
		return searchEmailsOut{}, 0, refusef("mode %s needs an embedding profile, which this server does not have; mode lexical needs none", mode)
	case errors.As(err, new(*mailsearch.ProviderError)):
		return searchEmailsOut{}, 0, refusef("the embedding provider did not embed the query just now; mode lexical searches without it")
	case err != nil:
		return searchEmailsOut{}, 0, err
	}
	ids := make([]uuid.UUID, len(hits))
	scores := make(map[uuid.UUID]float64, len(hits))
	for i, h := range hits {
		ids[i] = h.StoredEmailID
		scores[h.StoredEmailID] = h.Score
	}
	found, err := mailstore.FilterEmails(ctx, s.Pool, ids, f)
	if err != nil {
		return searchEmailsOut{}, 0, err
	}
	out := searchEmailsOut{Mode: string(mode), Emails: []emailOut{}}
	for _, e := range found[:min(len(found), limit)] {
		o := emailOf(e)
		score := scores[e.ID]
		o.Score = &score
		out.Emails = append(out.Emails, o)
	}
	return out, len(out.Emails), nil
}
