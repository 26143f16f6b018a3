// Package httpserver serves MailFathom's one HTTP address: River UI, the
// health and readiness probes, and Prometheus metrics.
//
// /healthz and /readyz are unauthenticated, for orchestrators; they reveal
// nothing but up/down and, on /readyz, which check failed. /metrics is
// unauthenticated like every Prometheus endpoint and carries no label
// derived from mail. River UI is mounted by the caller behind basic auth.
package httpserver

import (
	"context"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ReadinessCheck reports whether the service can do its work; a non-nil
// error makes /readyz answer 503 with the error's text, which must therefore
// carry no secret.
type ReadinessCheck func(ctx context.Context) error

// Routes is what NewMux serves.
type Routes struct {
	// Ready is the readiness check. Required.
	Ready ReadinessCheck
	// Gatherer supplies /metrics. Required.
	Gatherer prometheus.Gatherer
	// Mount, when set, adds further routes (River UI) to the mux.
	Mount func(*http.ServeMux)
}

// readyTimeout bounds one readiness check, so a hung database makes the
// probe fail rather than hang.
const readyTimeout = 3 * time.Second

// NewMux builds the handler for the service's HTTP address.
func NewMux(r Routes) *http.ServeMux {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, req *http.Request) {
		ctx, cancel := context.WithTimeout(req.Context(), readyTimeout)
		defer cancel()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if err := r.Ready(ctx); err != nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte("not ready: " + err.Error() + "\n"))
			return
		}
		_, _ = w.Write([]byte("ready\n"))
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(r.Gatherer, promhttp.HandlerOpts{}))
	if r.Mount != nil {
		r.Mount(mux)
	}
	return mux
}
