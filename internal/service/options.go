// Package service runs `mailfathom serve`: it brings up the database (the
// embedded default when none is configured), applies migrations, starts the
// River client with every worker, serves River UI, /metrics and the health
// probes on one address, and shuts all of it down in the order that keeps
// committed work durable.
package service

import (
	"context"
	"io"
	"log/slog"
	"time"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// Options is everything Run needs, already validated by the configuration
// layer.
type Options struct {
	// Logger receives the service's structured logs. Required.
	Logger *slog.Logger
	// Console receives the few human-oriented lines an operator starting
	// the service by hand needs (where River UI is, a generated password
	// the first time). Default: discard.
	Console io.Writer

	// DatabaseConnString is the configured database without its password;
	// empty selects the embedded default.
	DatabaseConnString string
	// DatabasePassword resolves the configured database password per
	// connection; nil when none is configured.
	DatabasePassword database.PasswordFunc
	// DatabaseMaxConns bounds the pool. Default: 10.
	DatabaseMaxConns int32
	// EmbeddedDataDir is where the embedded default keeps its cluster.
	EmbeddedDataDir string

	// HTTPAddr is the address River UI, /metrics and the probes are served
	// on; port 0 picks a free one (see Listening).
	HTTPAddr string
	// UIEnabled mounts River UI.
	UIEnabled bool
	// UIUsername is River UI's basic-auth user.
	UIUsername string
	// UIPassword resolves River UI's password per request; nil with the
	// embedded default generates one.
	UIPassword func(ctx context.Context) ([]byte, error)

	// MigrateOnStart applies pending migrations at start; otherwise a
	// database that is not current stops the start.
	MigrateOnStart bool
	// QueueWorkers is the worker count per queue.
	QueueWorkers map[string]int
	// ShutdownDrain is how long running jobs get to finish at shutdown.
	ShutdownDrain time.Duration
	// AccountCount is how many mailbox accounts are configured.
	AccountCount int

	// Config is the configuration the workers read. Default: the defaults
	// of an empty environment.
	Config *config.Config
	// Resolver resolves secret references. Default: the process
	// environment and the standard secret directories.
	Resolver *secret.Resolver

	// Listening, when set, is called with the bound HTTP address once the
	// service is ready to serve.
	Listening func(addr string)
}
