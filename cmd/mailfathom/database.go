package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/service"
)

// openDatabase opens the configured database for a command other than
// serve or, when none is configured, connects to the embedded one the
// running serve started: a command never starts a cluster of its own, so
// it can run beside serve. close releases the pool.
func openDatabase(ctx context.Context, cfg *config.Config, resolver *secret.Resolver, stderr io.Writer) (*pgxpool.Pool, func(), bool) {
	opts := service.OptionsFromConfig(cfg, resolver)
	connString := opts.DatabaseConnString
	if connString == "" {
		var err error
		connString, err = pgcluster.ConnectEmbedded(opts.EmbeddedDataDir)
		if errors.Is(err, pgcluster.ErrNotRunning) {
			abs, _ := filepath.Abs(opts.EmbeddedDataDir)
			fmt.Fprintf(stderr, "mailfathom: no embedded database is running in %s: start `mailfathom serve` first (it starts the embedded database), or set MAILFATHOM_EMBEDDED_DATA_DIR to the data directory serve uses (or MAILFATHOM_DATABASE_URL to a configured database)\n", abs)
			return nil, nil, false
		}
		if err != nil {
			fmt.Fprintf(stderr, "mailfathom: %v\n", err)
			return nil, nil, false
		}
	}
	pool, err := database.Open(ctx, database.Options{ConnString: connString, Password: opts.DatabasePassword, MaxConns: 4})
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return nil, nil, false
	}
	return pool, pool.Close, true
}
