// Package riverui mounts River UI (riverqueue.com/riverui) behind HTTP basic
// authentication.
//
// The library's handler has no authentication of its own, and River UI lets
// whoever opens it retry, cancel and delete jobs, so it is never served
// without credentials. The handler is mounted under its prefix with the
// prefix left on the request path: the library routes on the full path when
// its Prefix is set, and stripping it as well breaks every asset URL.
package riverui

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/riverqueue/river"
	upstream "riverqueue.com/riverui"
)

// Prefix is the path River UI is served under.
const Prefix = "/riverui"

// Credentials are the basic-auth user name and a source for the password.
// Password is called for every request so a rotated secret file takes effect
// without a restart; it must not return an empty password.
type Credentials struct {
	Username string
	Password func(ctx context.Context) ([]byte, error)
}

// Handler is River UI behind basic authentication.
type Handler struct {
	ui    *upstream.Handler
	creds Credentials
	log   *slog.Logger
}

// New builds the handler over client. Call Start before serving.
func New(client *river.Client[pgx.Tx], creds Credentials, logger *slog.Logger) (*Handler, error) {
	if creds.Username == "" || creds.Password == nil {
		return nil, errors.New("riverui: credentials are required")
	}
	ui, err := upstream.NewHandler(&upstream.HandlerOpts{
		Endpoints: upstream.NewEndpoints(client, nil),
		Logger:    logger,
		Prefix:    Prefix,
	})
	if err != nil {
		return nil, fmt.Errorf("riverui: %w", err)
	}
	return &Handler{ui: ui, creds: creds, log: logger}, nil
}

// Start starts the library handler's background services; they stop when
// ctx ends.
func (h *Handler) Start(ctx context.Context) error {
	if err := h.ui.Start(ctx); err != nil {
		return fmt.Errorf("riverui: start: %w", err)
	}
	return nil
}

// Mount registers the handler on mux under Prefix.
func (h *Handler) Mount(mux *http.ServeMux) {
	mux.Handle(Prefix+"/", h)
	mux.Handle(Prefix, http.RedirectHandler(Prefix+"/", http.StatusMovedPermanently))
}

// ServeHTTP implements http.Handler: a request without valid credentials
// gets 401 and a challenge, and never reaches River UI.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.Protect(h.ui).ServeHTTP(w, r)
}

// Protect puts next behind the same basic authentication as River UI: the
// API and the status page are served to whoever may open River UI, and to
// nobody else.
func (h *Handler) Protect(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !h.authorized(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="MailFathom", charset="UTF-8"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (h *Handler) authorized(r *http.Request) bool {
	user, pass, ok := r.BasicAuth()
	if !ok {
		return false
	}
	want, err := h.creds.Password(r.Context())
	if err != nil || len(want) == 0 {
		// The failure is the secret store's, not the caller's; say which
		// kind without the material.
		h.log.ErrorContext(r.Context(), "River UI password could not be resolved; refusing the request",
			slog.String("error_type", failure.Name(err)))
		return false
	}
	defer clear(want)
	// Hash both sides so the comparison takes the same time whatever the
	// lengths, then compare in constant time.
	userOK := subtle.ConstantTimeCompare(digest([]byte(user)), digest([]byte(h.creds.Username)))
	passOK := subtle.ConstantTimeCompare(digest([]byte(pass)), digest(want))
	return userOK&passOK == 1
}

func digest(b []byte) []byte {
	sum := sha256.Sum256(b)
	return sum[:]
}
