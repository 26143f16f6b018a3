// Package mailsearch answers a search over the served mail in one of three
// modes: lexical (the full-text index), semantic (passage vectors under
// the active embedding profile, through the vector index) and hybrid (the
// two rankings fused by reciprocal rank). The command line, the HTTP API
// and the MCP tools all ask through it, so they answer alike.
//
// A semantic or hybrid search embeds the query with the provider, under
// the AiProviderInvocation pipeline like every embedding call. A semantic
// search the provider fails fails too (a *ProviderError), and so does one
// whose answer names another model than the one the profile's vectors are
// of (EmbeddingModelChanged): its vector is not comparable with theirs. A
// hybrid search whose query cannot be embedded — no profile, a provider
// that fails, answers another model or does not answer within
// QueryEmbeddingWait — answers from its lexical half at once, ran beside
// the embedding, and says so (Result.LexicalOnly) rather than failing or
// silently ranking by words alone. Mail not yet
// embedded under the active profile is still found by the lexical half of a
// hybrid search. Tombstoned and no longer served mail is never found: both
// halves read only the served mail.
//
// A request's filter narrows the answer without shrinking it: the hits
// are the best of the messages the filter admits, as many as asked while
// that many match, never the best of all mail filtered afterwards.
package mailsearch

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/google/uuid"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailstore"
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

// ErrNoProfile is a semantic search, or a search for similar mail, without
// an embedding profile.
var ErrNoProfile = errors.New("mailsearch: semantic search needs an embedding profile (MAILFATHOM_EMBEDDING_PROVIDER_URL)")

// ErrUnknownMode is a mode that is none of Modes.
var ErrUnknownMode = errors.New("mailsearch: the mode must be lexical, semantic or hybrid")

// ErrNotEmbedded is a search for mail similar to a message that has no
// vector under the active profile yet, or is not served.
var ErrNotEmbedded = errors.New("mailsearch: the message has no vectors under the active embedding profile")

// The reasons a hybrid search ranked by its lexical half alone
// (Result.LexicalOnly). A provider's failure is followed by its identity
// in brackets.
const (
	LexicalOnlyNoProfile      = "no embedding profile is configured"
	LexicalOnlyProviderSlow   = "the embedding provider did not embed the query in time"
	LexicalOnlyProviderFailed = "the embedding provider did not embed the query"
)

// DefaultQueryEmbeddingWait is how long a hybrid search waits for the
// provider to embed its query by default: well above a healthy local
// model's answer, well below a person's patience.
const DefaultQueryEmbeddingWait = 3 * time.Second

// rrfK is the constant of reciprocal rank fusion: a document's fused
// score is the sum over rankings of 1/(rrfK + rank). 60 is the value the
// method was published with and is insensitive to tuning.
const rrfK = 60

// restrictedScope is the most messages a filter may admit for a search to
// be restricted to exactly those: both halves then rank every one of them.
// A filter admitting more narrows the rankings' hits, each ranking
// searching deeper while fewer than asked pass.
const restrictedScope = 2000

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
	// Index is the process's copy of the vector index's centroids.
	// Default: one of the searcher's own.
	Index *searchindex.VectorIndex
	// QueryEmbeddingWait bounds how long a hybrid search waits for its
	// query's embedding before answering from its lexical half. Default
	// DefaultQueryEmbeddingWait.
	QueryEmbeddingWait time.Duration

	once sync.Once
	own  *searchindex.VectorIndex

	mu sync.Mutex
	// recorded is the model the active profile's vectors are of, once
	// read non-empty.
	recorded string
}

// Request is one search.
type Request struct {
	Text    string
	Mode    Mode // "" is DefaultMode
	Account string
	Alias   string
	Limit   int
	// Filter, when set, narrows the answer to the messages it admits (its
	// Accounts, Account and Alias are the searcher's and the request's).
	Filter *mailstore.EmailFilter
}

// Result is a search's answer.
type Result struct {
	// Mode is the mode the search ran in.
	Mode Mode
	// Hits are the messages found, best first.
	Hits []Hit
	// LexicalOnly, when set, is why a hybrid search ranked by its lexical
	// half alone: one of the LexicalOnly reasons.
	LexicalOnly string
}

// Hit is one message found.
type Hit struct {
	StoredEmailID uuid.UUID  `json:"email_id"`
	Account       string     `json:"account"`
	Alias         string     `json:"alias"`
	SentAt        *time.Time `json:"sent_at"`
	From          string     `json:"from"`
	Subject       string     `json:"subject"`
	// Labels are the server's labels of the message (Gmail's X-GM-LABELS)
	// as last observed, absent where the server has none.
	Labels []string `json:"labels,omitempty"`
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

// index is Index, or the searcher's own.
func (s *Searcher) index() *searchindex.VectorIndex {
	if s.Index != nil {
		return s.Index
	}
	s.once.Do(func() { s.own = searchindex.NewVectorIndex() })
	return s.own
}

// clampLimit is a request's limit: default 20, at most 500.
func clampLimit(limit int) int {
	if limit <= 0 {
		return 20
	}
	return min(limit, 500)
}

// Search answers r, best first, each hit with its labels.
func (s *Searcher) Search(ctx context.Context, r Request) (Result, error) {
	res, err := s.search(ctx, r)
	if err != nil {
		return res, err
	}
	res.Hits, err = s.labelled(ctx, res.Hits)
	return res, err
}

// labelled returns hits with each message's labels.
func (s *Searcher) labelled(ctx context.Context, hits []Hit) ([]Hit, error) {
	if len(hits) == 0 {
		return hits, nil
	}
	ids := make([]uuid.UUID, len(hits))
	for i, h := range hits {
		ids[i] = h.StoredEmailID
	}
	labels, err := resilience.Get(ctx, s.Registry, dbKey, "search-labels", func(ctx context.Context) (map[uuid.UUID][]string, error) {
		return mailstore.EmailLabels(ctx, s.Querier, ids)
	})
	if err != nil {
		return nil, err
	}
	for i := range hits {
		hits[i].Labels = labels[hits[i].StoredEmailID]
	}
	return hits, nil
}

func (s *Searcher) search(ctx context.Context, r Request) (Result, error) {
	mode := cmp.Or(r.Mode, s.DefaultMode())
	if !slices.Contains(Modes, mode) {
		return Result{}, ErrUnknownMode
	}
	if mode == Semantic && s.Embedder == nil {
		return Result{}, ErrNoProfile
	}
	limit := clampLimit(r.Limit)
	n, err := s.narrow(ctx, r.Account, r.Alias, r.Filter)
	if err != nil || n.none {
		return Result{Mode: mode, Hits: []Hit{}}, err
	}
	switch mode {
	case Lexical:
		hits, err := s.lexical(ctx, r, n, limit)
		return Result{Mode: mode, Hits: hits}, err
	case Semantic:
		vector, err := s.embed(ctx, r.Text)
		if err != nil {
			return Result{}, &ProviderError{Err: err}
		}
		hits, err := s.semantic(ctx, searchindex.SemanticQuery{Vector: vector, Account: r.Account, Alias: n.alias}, n, limit)
		return Result{Mode: mode, Hits: hits}, err
	}
	// Each half ranks more than it answers, so a message ranked modestly
	// by both can still rise above one only a single half found. The
	// lexical half runs while the query is embedded, so a provider that
	// cannot embed it costs the search no more than its wait.
	depth := min(2*limit, 500)
	type lexicalAnswer struct {
		hits []Hit
		err  error
	}
	lexicalDone := make(chan lexicalAnswer, 1)
	go func() {
		hits, err := s.lexical(ctx, r, n, depth)
		lexicalDone <- lexicalAnswer{hits, err}
	}()
	vector, lexicalOnly := s.embedQuery(ctx, r.Text)
	lex := <-lexicalDone
	if lex.err != nil {
		return Result{}, lex.err
	}
	if lexicalOnly != "" {
		return Result{Mode: mode, Hits: lex.hits[:min(limit, len(lex.hits))], LexicalOnly: lexicalOnly}, nil
	}
	sem, err := s.semantic(ctx, searchindex.SemanticQuery{Vector: vector, Account: r.Account, Alias: n.alias}, n, depth)
	if err != nil {
		return Result{}, err
	}
	return Result{Mode: mode, Hits: fuse(limit, lex.hits, sem)}, nil
}

// embedQuery embeds a hybrid search's query, waiting at most
// QueryEmbeddingWait, and returns its vector or why there is none.
func (s *Searcher) embedQuery(ctx context.Context, text string) ([]float32, string) {
	if s.Embedder == nil {
		return nil, LexicalOnlyNoProfile
	}
	wait, cancel := context.WithTimeout(ctx, cmp.Or(s.QueryEmbeddingWait, DefaultQueryEmbeddingWait))
	defer cancel()
	vector, err := s.embed(wait, text)
	switch {
	case err == nil:
		return vector, ""
	case wait.Err() != nil && ctx.Err() == nil:
		return nil, LexicalOnlyProviderSlow
	}
	identity, ok := failure.Identity(err)
	if !ok {
		identity = embedding.FailureProviderUnavailable
	}
	return nil, failure.Text(LexicalOnlyProviderFailed, identity)
}

// embed embeds a query's text, and refuses its vector when the answer
// names another model than the one the active profile's vectors are of
// (answeredModel): ranked against them it would find nothing meaningful.
func (s *Searcher) embed(ctx context.Context, text string) ([]float32, error) {
	vs, model, err := s.Embedder.Embed(ctx, []string{text})
	if err != nil {
		return nil, err
	}
	if err := s.answeredModel(ctx, model); err != nil {
		return nil, err
	}
	return vs[0], nil
}

// answeredModel returns a *embedding.ModelChangedError when model, the one
// a query's answer names, is another (embedding.SameModel) than the one
// recorded for the active profile's vectors. An answer naming no model,
// or a profile none of whose answers named one, is not compared. A search
// reads the recorded model and never records one: the embed jobs do.
func (s *Searcher) answeredModel(ctx context.Context, model string) error {
	if model == "" {
		return nil
	}
	s.mu.Lock()
	recorded := s.recorded
	s.mu.Unlock()
	if recorded == "" {
		p := s.Embedder.Profile()
		var err error
		recorded, err = resilience.Get(ctx, s.Registry, dbKey, "answered-model", func(ctx context.Context) (string, error) {
			profile, found, err := searchindex.FindProfile(ctx, s.Querier, p.Model, p.Dimensions)
			if err != nil || !found {
				return "", err
			}
			return searchindex.AnsweredModel(ctx, s.Querier, profile)
		})
		if err != nil {
			return err
		}
		// A recorded model never changes, so the searcher keeps it.
		s.mu.Lock()
		s.recorded = recorded
		s.mu.Unlock()
	}
	if recorded != "" && !embedding.SameModel(recorded, model) {
		return &embedding.ModelChangedError{Recorded: recorded, Answered: model}
	}
	return nil
}

// narrowing is how a request's filter narrows its search.
type narrowing struct {
	// alias is the folder alias the halves narrow by themselves: the
	// request's, unless a folder of it holds occurrences of emails held
	// elsewhere (mailstore.AliasShared). The indexes know each email by
	// the folder of its holder row, so such an alias is the filter's to
	// apply (mailstore.InAlias), and the halves search every folder.
	alias string
	// sentSince and sentUntil are the filter's sending dates, which the
	// semantic half applies as it searches.
	sentSince, sentUntil *time.Time
	// emails, when set, are every message the filter admits: both halves
	// search those alone.
	emails []uuid.UUID
	// keep, when set, is the filter the halves' hits are narrowed by, for
	// a filter that admits more than restrictedScope messages; rest says
	// whether it narrows by more than the sending dates.
	keep *mailstore.EmailFilter
	rest bool
	// none: the filter admits no message.
	none bool
}

// narrow reads how f (nil for none) narrows a search of account and
// alias: not at all, to the few messages it admits, or by filtering the
// hits.
func (s *Searcher) narrow(ctx context.Context, account, alias string, f *mailstore.EmailFilter) (narrowing, error) {
	var keep mailstore.EmailFilter
	if f != nil {
		keep = *f
	}
	keep.Accounts, keep.Account, keep.Alias = s.Accounts, account, alias
	n := narrowing{alias: alias, sentSince: keep.SentSince, sentUntil: keep.SentUntil}
	if alias != "" {
		shared, err := resilience.Get(ctx, s.Registry, dbKey, "search-alias", func(ctx context.Context) (bool, error) {
			return mailstore.AliasShared(ctx, s.Querier, s.Accounts, account, alias)
		})
		if err != nil {
			return narrowing{}, err
		}
		if shared {
			n.alias = ""
		}
	}
	n.rest = keep.ReceivedSince != nil || keep.ReceivedUntil != nil || keep.From != "" || keep.To != "" ||
		keep.HasAttachment != nil || keep.Unread != nil || keep.Flagged != nil || keep.Label != "" || n.alias != alias
	if !n.rest && keep.SentSince == nil && keep.SentUntil == nil {
		return narrowing{alias: alias}, nil
	}
	admitted, err := resilience.Get(ctx, s.Registry, dbKey, "search-filter", func(ctx context.Context) ([]mailstore.EmailSummary, error) {
		return mailstore.ListEmails(ctx, s.Querier, keep, nil, restrictedScope+1)
	})
	if err != nil {
		return narrowing{}, err
	}
	if len(admitted) <= restrictedScope {
		n.emails = make([]uuid.UUID, len(admitted))
		for i, e := range admitted {
			n.emails[i] = e.ID
		}
		n.none = len(n.emails) == 0
		return n, nil
	}
	n.keep = &keep
	return n, nil
}

// kept returns those of hits that n's filter admits, in order.
func (s *Searcher) kept(ctx context.Context, n narrowing, hits []Hit) ([]Hit, error) {
	ids := make([]uuid.UUID, len(hits))
	for i, h := range hits {
		ids[i] = h.StoredEmailID
	}
	admitted, err := resilience.Get(ctx, s.Registry, dbKey, "search-filter", func(ctx context.Context) ([]mailstore.EmailSummary, error) {
		return mailstore.FilterEmails(ctx, s.Querier, ids, *n.keep)
	})
	if err != nil {
		return nil, err
	}
	in := make(map[uuid.UUID]bool, len(admitted))
	for _, e := range admitted {
		in[e.ID] = true
	}
	out := hits[:0:0]
	for _, h := range hits {
		if in[h.StoredEmailID] {
			out = append(out, h)
		}
	}
	return out, nil
}

// lexical ranks by words; with a filter that admits many messages it
// ranks four times as many of the most recent matches while fewer than
// limit of them pass it, until every match is ranked.
func (s *Searcher) lexical(ctx context.Context, r Request, n narrowing, limit int) ([]Hit, error) {
	q := searchindex.Query{Text: r.Text, Accounts: s.Accounts, Account: r.Account, Alias: n.alias, Limit: limit,
		Configuration: s.Configuration, Emails: n.emails}
	if n.keep == nil {
		return s.lexicalHits(ctx, q)
	}
	for window := searchindex.RankWindow; ; window *= 4 {
		q.Limit, q.Window = window, window
		hits, err := s.lexicalHits(ctx, q)
		if err != nil {
			return nil, err
		}
		kept, err := s.kept(ctx, n, hits)
		if err != nil || len(kept) >= limit || len(hits) < window {
			return kept[:min(limit, len(kept))], err
		}
	}
}

func (s *Searcher) lexicalHits(ctx context.Context, q searchindex.Query) ([]Hit, error) {
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

// semantic ranks by q.Vector's meaning under the active profile, q
// completed with the searcher's accounts and n; with a filter that admits
// many messages and narrows by more than the sending dates it asks for
// four times as many while fewer than limit pass it, until every message
// with vectors is ranked.
func (s *Searcher) semantic(ctx context.Context, q searchindex.SemanticQuery, n narrowing, limit int) ([]Hit, error) {
	q.Accounts, q.Index, q.Limit = s.Accounts, s.index(), limit
	q.SentSince, q.SentUntil, q.Emails = n.sentSince, n.sentUntil, n.emails
	if n.keep == nil || !n.rest {
		return s.semanticHits(ctx, q)
	}
	for ask := max(4*limit, 100); ; ask *= 4 {
		q.Limit = min(ask, searchindex.MaxSemanticLimit)
		hits, err := s.semanticHits(ctx, q)
		if err != nil {
			return nil, err
		}
		kept, err := s.kept(ctx, n, hits)
		if err != nil || len(kept) >= limit || len(hits) < q.Limit || q.Limit == searchindex.MaxSemanticLimit {
			return kept[:min(limit, len(kept))], err
		}
	}
}

func (s *Searcher) semanticHits(ctx context.Context, q searchindex.SemanticQuery) ([]Hit, error) {
	p := s.Embedder.Profile()
	hits, err := resilience.Get(ctx, s.Registry, dbKey, "semantic-search", func(ctx context.Context) ([]searchindex.SemanticHit, error) {
		profile, err := searchindex.EnsureProfile(ctx, s.Querier, p.Model, p.Dimensions)
		if err != nil {
			return nil, err
		}
		q.Profile = profile
		return searchindex.SemanticSearch(ctx, s.Querier, q)
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

// SimilarRequest asks for the messages nearest in meaning to one message.
type SimilarRequest struct {
	// EmailID is the message to start from. Required.
	EmailID uuid.UUID
	// Account, Alias, Filter and Limit are as in Request.
	Account string
	Alias   string
	Filter  *mailstore.EmailFilter
	Limit   int
}

// Similar returns the served messages nearest to r.EmailID by its
// passages' vectors (their normalized mean, searchindex.EmailVector),
// best first, each with its labels, the message itself left out: a semantic search through the
// vector index that needs no provider, since the vectors are stored.
// It fails with ErrNoProfile without a profile and ErrNotEmbedded for a
// message with no vector under it.
func (s *Searcher) Similar(ctx context.Context, r SimilarRequest) ([]Hit, error) {
	if s.Embedder == nil {
		return nil, ErrNoProfile
	}
	p := s.Embedder.Profile()
	vector, err := resilience.Get(ctx, s.Registry, dbKey, "similar", func(ctx context.Context) ([]float32, error) {
		profile, found, err := searchindex.FindProfile(ctx, s.Querier, p.Model, p.Dimensions)
		if err != nil || !found {
			return nil, err
		}
		return searchindex.EmailVector(ctx, s.Querier, profile, s.Accounts, r.EmailID)
	})
	if err != nil {
		return nil, err
	}
	if vector == nil {
		return nil, ErrNotEmbedded
	}
	n, err := s.narrow(ctx, r.Account, r.Alias, r.Filter)
	if err != nil || n.none {
		return nil, err
	}
	hits, err := s.semantic(ctx, searchindex.SemanticQuery{Vector: vector, Account: r.Account, Alias: n.alias, Exclude: []uuid.UUID{r.EmailID}},
		n, clampLimit(r.Limit))
	if err != nil {
		return nil, err
	}
	return s.labelled(ctx, hits)
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

// ProviderError is a semantic search whose query the provider did not
// embed.
type ProviderError struct{ Err error }

func (e *ProviderError) Error() string {
	return fmt.Sprintf("mailsearch: the embedding provider did not embed the query: %v", e.Err)
}

func (e *ProviderError) Unwrap() error { return e.Err }
