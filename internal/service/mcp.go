package service

import (
	"log/slog"
	"net/http"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/mcpserver"
	"github.com/mailfathom/mailfathom/internal/status"
)

// mcpPath is where serve offers the Model Context Protocol's streamable
// HTTP transport, behind River UI's basic authentication.
const mcpPath = "/mcp"

// newMCPHandler returns the /mcp handler, its calls counted on reg. It
// does not authenticate: the caller mounts it behind River UI's password.
func newMCPHandler(pool *pgxpool.Pool, cfg *config.Config, searcher *mailsearch.Searcher, client *river.Client[pgx.Tx],
	statusOpts status.Options, reg prometheus.Registerer, logger *slog.Logger) (http.Handler, error) {
	metrics, err := mcpserver.NewMetrics(reg)
	if err != nil {
		return nil, err
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Pool: pool, Config: cfg, Searcher: searcher, Inserter: client, Status: statusOpts,
		Transport: mcpserver.TransportHTTP, Logger: logger, Metrics: metrics,
	})
	if err != nil {
		return nil, err
	}
	return mcpserver.NewHTTPHandler(srv), nil
}
