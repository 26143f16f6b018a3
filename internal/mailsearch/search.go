// Package mailsearch answers a search over the served mail in one of three
// modes: lexical (the full-text index), semantic (passage vectors under
// the active embedding profile) and hybrid (the two rankings fused by
// reciprocal rank). The command line and the HTTP API both ask through
// it, so they answer alike.
//
// A semantic or hybrid search embeds the query with the provider, under
// the AiProviderInvocation pipeline like every embedding call; a provider
// that fails fails the search (a *ProviderError) rather
// than silently answering lexically. Mail not yet embedded under the
// active profile is still found by the lexical half of a hybrid search.
// Tombstoned and no longer served mail is never found: both halves read
// only the served mail.
package mailsearch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/google/uuid"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/searchindex"
)

// Mode is how a search ranks.
type Mode string

// The search modes.
const (
	Lexical  Mode = "lexical"
	Semantic Mode = "semantic"
	Hybrid   Mode = "hybrid"
)

// Modes lists the modes.
var Modes = []Mode{Lexical, Semantic, Hybrid}

// ErrNoProfile is a semantic or hybrid search without an embedding profile.
var ErrNoProfile = errors.New("mailsearch: semantic and hybrid search need an embedding profile (MAILFATHOM_EMBEDDING_PROVIDER_URL)")

// ErrUnknownMode is a mode that is none of Modes.
var ErrUnknownMode = errors.New("mailsearch: the mode must be lexical, semantic or hybrid")

// rrfK is the constant of reciprocal rank fusion: a document's fused
// score is the sum over rankings of 1/(rrfK + rank). 60 is the value the
// method was published with and is insensitive to tuning.
const rrfK = 60

// Searcher runs searches. Embedder nil means no profile: lexical only.
type Searcher struct {
	// Querier reads the database. Required.
	Querier searchindex.Querier
	// Registry runs the database queries under DatabaseCommandExecution.
	// Required.
	Registry *resilience.Registry
	// Configuration is the text search configuration compiled into the
	// lexical index. Required.
	Configuration string
	// Accounts are the configured account keys: only their mail is served.
	Accounts []string
	// Embedder embeds the query under the active profile. Optional.
	Embedder *embedding.Client
}

// Request is one search.
type Request struct {
	Text    string
	Mode    Mode // "" is DefaultMode
	Account string
	Alias   string
	Limit   int
}

// Hit is one message found.
type Hit struct {
	StoredEmailID uuid.UUID  `json:"email_id"`
	Account       string     `json:"account"`
	Alias         string     `json:"alias"`
	SentAt        *time.Time `json:"sent_at"`
	From          string     `json:"from"`
	Subject       string     `json:"subject"`
	// Passage is the ordinal of the message's passage nearest to the
	// query (0 the subject), nil when only the lexical index found it.
	Passage *int16 `json:"best_passage"`
	// Score is the lexical rank, the cosine similarity or the fused
	// reciprocal-rank score, by mode: comparable within one answer only.
	Score float64 `json:"score"`
}

// DefaultMode is hybrid with an embedding profile and lexical without.
func (s *Searcher) DefaultMode() Mode {
	if s.Embedder != nil {
		return Hybrid
	}
	return Lexical
}

// Search answers r, best first.
func (s *Searcher) Search(ctx context.Context, r Request) ([]Hit, error) {
	mode := cmp.Or(r.Mode, s.DefaultMode())
	if !slices.Contains(Modes, mode) {
		return nil, ErrUnknownMode
	}
	limit := r.Limit
	if limit <= 0 {
		limit = 20
	}
	limit = min(limit, 500)
	switch mode {
	case Lexical:
		return s.lexical(ctx, r, limit)
	case Semantic:
		return s.semantic(ctx, r, limit)
	}
	// Each half ranks more than it answers, so a message ranked modestly
	// by both can still rise above one only a single half found.
	depth := min(2*limit, 500)
	lex, err := s.lexical(ctx, r, depth)
	if err != nil {
		return nil, err
	}
	sem, err := s.semantic(ctx, r, depth)
	if err != nil {
		return nil, err
	}
	return fuse(limit, lex, sem), nil
}

func (s *Searcher) lexical(ctx context.Context, r Request, limit int) ([]Hit, error) {
	q := searchindex.Query{Text: r.Text, Accounts: s.Accounts, Account: r.Account, Alias: r.Alias, Limit: limit, Configuration: s.Configuration}
	hits, err := resilience.Get(ctx, s.Registry, dbKey, "search", func(ctx context.Context) ([]searchindex.Hit, error) {
		return searchindex.Search(ctx, s.Querier, q)
	})
	if err != nil {
		return nil, err
	}
	out := make([]Hit, len(hits))
	for i, h := range hits {
		out[i] = Hit{StoredEmailID: h.StoredEmailID, Account: h.Account, Alias: h.Alias, SentAt: h.SentAt, From: h.From, Subject: h.Subject, Score: float64(h.Rank)}
	}
	return out, nil
}

func (s *Searcher) semantic(ctx context.Context, r Request, limit int) ([]Hit, error) {
	if s.Embedder == nil {
		return nil, ErrNoProfile
	}
	vs, err := s.Embedder.Embed(ctx, []string{r.Text})
	if err != nil {
		return nil, &ProviderError{Err: err}
	}
	p := s.Embedder.Profile()
	hits, err := resilience.Get(ctx, s.Registry, dbKey, "semantic-search", func(ctx context.Context) ([]searchindex.SemanticHit, error) {
		profile, err := searchindex.EnsureProfile(ctx, s.Querier, p.Model, p.Dimensions)
		if err != nil {
			return nil, err
		}
		return searchindex.SemanticSearch(ctx, s.Querier, searchindex.SemanticQuery{
			Profile: profile, Vector: vs[0], Accounts: s.Accounts, Account: r.Account, Alias: r.Alias, Limit: limit})
	})
	if err != nil {
		return nil, err
	}
	out := make([]Hit, len(hits))
	for i, h := range hits {
		passage := h.Passage
		out[i] = Hit{StoredEmailID: h.StoredEmailID, Account: h.Account, Alias: h.Alias, SentAt: h.SentAt, From: h.From, Subject: h.Subject,
			Passage: &passage, Score: float64(h.Score)}
	}
	return out, nil
}

var dbKey = resilience.Key{Class: resilience.DatabaseCommandExecution, Instance: resilience.SharedInstance}

// fuse ranks the union of the rankings by reciprocal rank fusion and keeps
// the first limit; a message keeps the best passage the semantic ranking
// gave it.
func fuse(limit int, rankings ...[]Hit) []Hit {
	byID := map[uuid.UUID]*Hit{}
	var order []uuid.UUID
	for _, ranking := range rankings {
		for rank, h := range ranking {
			f, ok := byID[h.StoredEmailID]
			if !ok {
				c := h
				c.Score = 0
				f = &c
				byID[h.StoredEmailID] = f
				order = append(order, h.StoredEmailID)
			}
			if f.Passage == nil {
				f.Passage = h.Passage
			}
			f.Score += 1 / float64(rrfK+rank+1)
		}
	}
	out := make([]Hit, 0, len(order))
	for _, id := range order {
		out = append(out, *byID[id])
	}
	slices.SortStableFunc(out, func(a, b Hit) int { return cmp.Compare(b.Score, a.Score) })
	if len(out) > limit {
		out = out[:limit]
	}
	return out
}

// ProviderError is a semantic or hybrid search whose query the provider
// did not embed.
type ProviderError struct{ Err error }

func (e *ProviderError) Error() string {
	return fmt.Sprintf("mailsearch: the embedding provider did not embed the query: %v", e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }
