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
	// LexicalOnly is why a hybrid search ranked by the words alone.
	LexicalOnly string `json:"lexical_only,omitempty" jsonschema:"present when a hybrid search could not rank by meaning (the query could not be embedded just now) and ranked by the words alone: why"`
}

type findSimilarEmailsIn struct {
	emailIDIn
	filters
	Limit int `json:"limit,omitempty" jsonschema:"at most this many messages (default and upper bound: the server's MAILFATHOM_MCP_MAX_RESULTS)"`
}

type findSimilarEmailsOut struct {
	Emails []emailOut `json:"emails" jsonschema:"the messages nearest in meaning, nearest first; the message itself is not among them"`
}

func (s *server) addSearchTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:  "search_emails",
		Title: "Search emails",
		Description: "Searches the stored mail by its words (lexical), by meaning (semantic) or both (hybrid), best matches first, " +
			"among the mail the same filters as list_emails admit: as many as limit while that many match. " +
			"By its words it ranks the 1 000 most recently sent matches of the mail asked for (more when the filters leave fewer).",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.searchEmails)
	addTool(s, srv, &mcp.Tool{
		Name:  "find_similar_emails",
		Title: "Find similar emails",
		Description: "Lists the stored messages nearest in meaning to one message (by its passages' embeddings), nearest first, " +
			"among the mail the same filters as list_emails admit. Needs the server's embedding profile and the message embedded.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.findSimilarEmails)
}

func (s *server) searchEmails(ctx context.Context, in searchEmailsIn) (searchEmailsOut, int, error) {
	text := strings.TrimSpace(in.Query)
	if text == "" {
		return searchEmailsOut{}, 0, refusef("query is required: the words or the description to search for")
	}
	mode := mailsearch.Mode(strings.ToLower(strings.TrimSpace(in.Mode)))
	f, err := s.emailFilter(ctx, in.filters)
	if err != nil {
		return searchEmailsOut{}, 0, err
	}
	res, err := s.Searcher.Search(ctx, mailsearch.Request{Text: text, Mode: mode, Account: f.Account, Alias: f.Alias,
		Limit: s.limit(in.Limit), Filter: &f})
	switch {
	case errors.Is(err, mailsearch.ErrUnknownMode):
		return searchEmailsOut{}, 0, refusef("mode must be lexical, semantic or hybrid")
	case errors.Is(err, mailsearch.ErrNoProfile):
		return searchEmailsOut{}, 0, refusef("mode %s needs an embedding profile, which this server does not have; mode lexical or hybrid needs none", mode)
	case errors.As(err, new(*mailsearch.ProviderError)):
		return searchEmailsOut{}, 0, refusef("the embedding provider did not embed the query just now; mode lexical or hybrid searches without it")
	case err != nil:
		return searchEmailsOut{}, 0, err
	}
	emails, err := s.emailsOf(ctx, res.Hits, f)
	if err != nil {
		return searchEmailsOut{}, 0, err
	}
	return searchEmailsOut{Mode: string(res.Mode), Emails: emails, LexicalOnly: res.LexicalOnly}, len(emails), nil
}

func (s *server) findSimilarEmails(ctx context.Context, in findSimilarEmailsIn) (findSimilarEmailsOut, int, error) {
	id, err := emailID(in.EmailID)
	if err != nil {
		return findSimilarEmailsOut{}, 0, err
	}
	f, err := s.emailFilter(ctx, in.filters)
	if err != nil {
		return findSimilarEmailsOut{}, 0, err
	}
	hits, err := s.Searcher.Similar(ctx, mailsearch.SimilarRequest{EmailID: id, Account: f.Account, Alias: f.Alias, Filter: &f, Limit: s.limit(in.Limit)})
	switch {
	case errors.Is(err, mailsearch.ErrNoProfile):
		return findSimilarEmailsOut{}, 0, refusef("finding similar mail needs an embedding profile, which this server does not have")
	case errors.Is(err, mailsearch.ErrNotEmbedded):
		_, found, rerr := mailstore.ReadEmail(ctx, s.Pool, s.accounts, id)
		if rerr != nil {
			return findSimilarEmailsOut{}, 0, rerr
		}
		if !found {
			return findSimilarEmailsOut{}, 0, errNoEmail
		}
		return findSimilarEmailsOut{}, 0, refusef("this message is not embedded yet (it has no vectors under the server's embedding profile); try again once it is")
	case err != nil:
		return findSimilarEmailsOut{}, 0, err
	}
	emails, err := s.emailsOf(ctx, hits, f)
	if err != nil {
		return findSimilarEmailsOut{}, 0, err
	}
	return findSimilarEmailsOut{Emails: emails}, len(emails), nil
}

// emailsOf returns the hits as the listing tools answer messages, in
// order, each with its score.
func (s *server) emailsOf(ctx context.Context, hits []mailsearch.Hit, f mailstore.EmailFilter) ([]emailOut, error) {
	ids := make([]uuid.UUID, len(hits))
	scores := make(map[uuid.UUID]float64, len(hits))
	for i, h := range hits {
		ids[i] = h.StoredEmailID
		scores[h.StoredEmailID] = h.Score
	}
	found, err := mailstore.FilterEmails(ctx, s.Pool, ids, f)
	if err != nil {
		return nil, err
	}
	out := []emailOut{}
	for _, e := range found {
		o := emailOf(e)
		score := scores[e.ID]
		o.Score = &score
		out = append(out, o)
	}
	return out, nil
}
