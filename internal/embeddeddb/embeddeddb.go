// Package embeddeddb runs the database MailFathom uses when none is
// configured: a private PostgreSQL cluster started from the system's
// PostgreSQL binaries under a local data directory, listening on a unix
// socket only, and stopped when the service stops.
//
// It is the out-of-the-box default for trying MailFathom on one machine, not
// a production deployment: it has no replication, no backups and no remote
// access. pgcluster installs the postgresql package when the binaries are
// missing and the process may do so.
package embeddeddb

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
)

// DatabaseName is the database MailFathom keeps its data in inside the
// embedded cluster.
const DatabaseName = "mailfathom"

// Database is a running embedded cluster.
type Database struct {
	cluster *pgcluster.Cluster
	// ConnString connects to DatabaseName over the cluster's socket.
	ConnString string
}

// Start starts (initialising on first use) the cluster under dataDir and
// makes sure DatabaseName exists in it.
func Start(ctx context.Context, dataDir string, logger *slog.Logger) (*Database, error) {
	logf := func(format string, args ...any) { logger.InfoContext(ctx, fmt.Sprintf(format, args...)) }
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("embedded database: data directory: %w", err)
	}
	logger.InfoContext(ctx, "starting the embedded PostgreSQL cluster", slog.String("data_dir", abs))
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{DataDir: abs, Durable: true, Logf: logf})
	if err != nil {
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	db := &Database{cluster: cluster, ConnString: cluster.ConnString(DatabaseName)}
	if err := ensureDatabase(ctx, cluster.ConnString("postgres")); err != nil {
		_ = cluster.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	return db, nil
}

// Stop stops the cluster.
func (d *Database) Stop(ctx context.Context) error {
	return d.cluster.Stop(ctx)
}

func ensureDatabase(ctx context.Context, adminConnString string) error {
	conn, err := pgx.Connect(ctx, adminConnString)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", DatabaseName).Scan(&exists); err != nil {
		return fmt.Errorf("look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{DatabaseName}.Sanitize()); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}
