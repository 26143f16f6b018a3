package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/service"
)

// openDatabase opens the configured database, or starts the embedded
// default when none is configured, for a command other than serve. close
// releases both.
func openDatabase(ctx context.Context, cfg *config.Config, resolver *secret.Resolver, logger *slog.Logger, stderr io.Writer) (*pgxpool.Pool, func(), bool) {
	opts := service.OptionsFromConfig(cfg, resolver)
	connString := opts.DatabaseConnString
	stopEmbedded := func() {}
	if connString == "" {
		db, err := pgcluster.StartEmbedded(ctx, opts.EmbeddedDataDir, logger)
		if err != nil {
			fmt.Fprintf(stderr, "mailfathom: %v\n", err)
			return nil, nil, false
		}
		stopEmbedded = func() { _ = db.Stop(context.WithoutCancel(ctx)) }
		connString = db.ConnString
	}
	pool, err := database.Open(ctx, database.Options{ConnString: connString, Password: opts.DatabasePassword, MaxConns: 4})
	if err != nil {
		stopEmbedded()
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return nil, nil, false
	}
	return pool, func() { pool.Close(); stopEmbedded() }, true
}
