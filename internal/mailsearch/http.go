package mailsearch

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
)

// searchTimeout bounds one API search: the provider's answer for the
// query and the two queries.
const searchTimeout = time.Minute

// Handler serves GET /api/v1/search.
type Handler struct {
	searcher *Searcher
	logger   *slog.Logger
}

// NewHandler returns a Handler over s; logger receives failures (their
// types, never a query).
func NewHandler(s *Searcher, logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{searcher: s, logger: logger}
}

// Mount adds GET /api/v1/search to mux behind protect (the UI's basic
// authentication): the answer shows subjects, which only the UI's users may
// read.
func (h *Handler) Mount(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	mux.Handle("GET /api/v1/search", protect(http.HandlerFunc(h.serve)))
}

// Answer is the JSON body of a successful search.
type Answer struct {
	Mode Mode  `json:"mode"`
	Hits []Hit `json:"hits"`
	// LexicalOnly, when present, is why a hybrid search ranked by words
	// alone (Result.LexicalOnly).
	LexicalOnly string `json:"lexical_only,omitempty"`
}

// problem is the JSON body of a refused or failed search.
type problem struct {
	Error string `json:"error"`
}

func (h *Handler) serve(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	req := Request{
		Text:    strings.TrimSpace(q.Get("q")),
		Mode:    Mode(strings.ToLower(strings.TrimSpace(q.Get("mode")))),
		Account: config.AccountKey(q.Get("account")),
		Alias:   config.NormalizeAlias(q.Get("alias")),
	}
	if req.Text == "" {
		writeJSON(w, http.StatusBadRequest, problem{"q is required: the words to search for"})
		return
	}
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 500 {
			writeJSON(w, http.StatusBadRequest, problem{"limit must be a whole number from 1 to 500"})
			return
		}
		req.Limit = n
	}
	if req.Mode != "" && !slices.Contains(Modes, req.Mode) {
		writeJSON(w, http.StatusBadRequest, problem{"mode must be lexical, semantic or hybrid"})
		return
	}
	if req.Account != "" && !slices.Contains(h.searcher.Accounts, req.Account) {
		writeJSON(w, http.StatusBadRequest, problem{"account is not a configured account"})
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), searchTimeout)
	defer cancel()
	res, err := h.searcher.Search(ctx, req)
	var pe *ProviderError
	switch {
	case errors.Is(err, ErrNoProfile):
		writeJSON(w, http.StatusConflict, problem{"semantic search needs an embedding profile; search with mode=lexical or hybrid"})
		return
	case errors.As(err, &pe):
		h.logger.WarnContext(ctx, "a search's query could not be embedded", slog.String("failure_type", failure.Name(err)))
		writeJSON(w, http.StatusServiceUnavailable, problem{"the embedding provider did not embed the query; search with mode=lexical meanwhile"})
		return
	case err != nil:
		h.logger.WarnContext(ctx, "a search failed", slog.String("failure_type", failure.Name(err)))
		writeJSON(w, http.StatusServiceUnavailable, problem{"the search could not be answered from the database"})
		return
	}
	if res.Hits == nil {
		res.Hits = []Hit{}
	}
	if res.LexicalOnly != "" {
		h.logger.InfoContext(ctx, "a hybrid search ranked by words alone: its query was not embedded", slog.String("reason", res.LexicalOnly))
	}
	writeJSON(w, http.StatusOK, Answer(res))
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	// A client that went away is nobody to tell.
	_ = json.NewEncoder(w).Encode(v)
}
