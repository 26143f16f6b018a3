package mutation

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// Handler serves the mutation API: POST /api/v1/mutations asks for a
// change, GET /api/v1/mutations/{id} reads one. It does not authenticate;
// the caller mounts it behind the same basic authentication as River UI.
type Handler struct {
	pool   *pgxpool.Pool
	cfg    *config.Config
	client *river.Client[pgx.Tx]
	logger *slog.Logger
}

// NewHandler returns the handler.
func NewHandler(pool *pgxpool.Pool, cfg *config.Config, client *river.Client[pgx.Tx], logger *slog.Logger) *Handler {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	return &Handler{pool: pool, cfg: cfg, client: client, logger: logger}
}

// Mount registers the routes on mux, each wrapped by protect.
func (h *Handler) Mount(mux *http.ServeMux, protect func(http.Handler) http.Handler) {
	mux.Handle("POST /api/v1/mutations", protect(http.HandlerFunc(h.create)))
	mux.Handle("GET /api/v1/mutations/{id}", protect(http.HandlerFunc(h.get)))
}

// requestTimeout bounds the queries of one request.
const requestTimeout = 10 * time.Second

// maxRequestBody bounds a request's JSON.
const maxRequestBody = 16 << 10

type createBody struct {
	EmailID          string `json:"email_id"`
	Kind             string `json:"kind"`
	DestinationAlias string `json:"destination_alias"`
	RequestID        string `json:"request_id"`
}

type problem struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

var (
	errBodyInvalid    = refuse(http.StatusBadRequest, "RequestBodyInvalid", "the body must be one JSON object with email_id, kind, destination_alias and request_id")
	errEmailIDInvalid = refuse(http.StatusBadRequest, "EmailIdInvalid", "email_id must be a stored email's id")
	errMutationID     = refuse(http.StatusNotFound, "MutationUnknown", "no mutation has this id")
)

func (h *Handler) create(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	var body createBody
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, maxRequestBody))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&body); err != nil || dec.More() {
		h.refused(w, errBodyInvalid)
		return
	}
	id, err := uuid.Parse(body.EmailID)
	if err != nil {
		h.refused(w, errEmailIDInvalid)
		return
	}
	m, created, err := Record(ctx, h.pool, h.cfg, h.client, Request{
		EmailID: id, Kind: body.Kind, DestinationAlias: body.DestinationAlias, RequestID: body.RequestID,
	})
	var refusal *RequestError
	switch {
	case errors.As(err, &refusal):
		h.refused(w, refusal)
		return
	case err != nil:
		h.logger.WarnContext(ctx, "a mutation request could not be recorded", slog.String("error", err.Error()))
		http.Error(w, "the request could not be recorded", http.StatusServiceUnavailable)
		return
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		h.logger.InfoContext(ctx, "mailbox mutation requested", slog.String("mutation", m.ID.String()),
			slog.String("kind", string(m.Kind)), slog.String("account", m.AccountKey), slog.String("email", m.EmailID.String()))
	}
	writeJSON(w, status, ViewOf(m))
}

func (h *Handler) get(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), requestTimeout)
	defer cancel()
	id, err := uuid.Parse(r.PathValue("id"))
	if err != nil {
		h.refused(w, errMutationID)
		return
	}
	m, found, err := mailstore.ReadMutation(ctx, h.pool, id)
	switch {
	case err != nil:
		h.logger.WarnContext(ctx, "a mutation could not be read", slog.String("error", err.Error()))
		http.Error(w, "the mutation could not be read", http.StatusServiceUnavailable)
	case !found:
		h.refused(w, errMutationID)
	default:
		writeJSON(w, http.StatusOK, ViewOf(m))
	}
}

func (h *Handler) refused(w http.ResponseWriter, e *RequestError) {
	writeJSON(w, e.Status, problem{Error: e.Reason, Message: e.text})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	_ = enc.Encode(v)
}
