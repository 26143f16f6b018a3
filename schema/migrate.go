package schema

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/golang-migrate/migrate/v4"
	migratepgx "github.com/golang-migrate/migrate/v4/database/pgx/v5"
	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// Migrate applies River's migrations and then the application's, holding an
// advisory lock for the whole of it, and returns the versions it left.
//
// The golang-migrate instance it builds is closed before Migrate returns:
// one left open holds a connection that makes pgxpool.Close hang.
func Migrate(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (Versions, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return Versions{}, fmt.Errorf("schema: acquire connection for the migration lock: %w", err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, "SELECT pg_advisory_lock($1)", advisoryLockKey); err != nil {
		return Versions{}, fmt.Errorf("schema: take the migration lock: %w", err)
	}
	defer func() {
		// A fresh context: the lock must be released even when ctx ended.
		_, _ = conn.Exec(context.WithoutCancel(ctx), "SELECT pg_advisory_unlock($1)", advisoryLockKey)
	}()

	riverMigrator, err := rivermigrate.New(riverpgxv5.New(pool), &rivermigrate.Config{Logger: logger})
	if err != nil {
		return Versions{}, fmt.Errorf("schema: river migrator: %w", err)
	}
	// River logs each migration it applies itself.
	if _, err := riverMigrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return Versions{}, fmt.Errorf("schema: apply river migrations: %w", err)
	}

	if err := migrateApplication(ctx, pool, logger); err != nil {
		return Versions{}, err
	}
	return Status(ctx, pool)
}

func migrateApplication(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) (err error) {
	m, closeAll, err := newMigrate(ctx, pool)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, closeAll()) }()

	before, _, _ := m.Version()
	if err := m.Up(); err != nil && !errors.Is(err, migrate.ErrNoChange) {
		return fmt.Errorf("schema: apply migrations: %w", err)
	}
	after, _, _ := m.Version()
	if after != before {
		logger.InfoContext(ctx, "applied schema migrations", slog.Uint64("from", uint64(before)), slog.Uint64("to", uint64(after)))
	}
	return nil
}

// newMigrate builds a golang-migrate instance over the embedded files and a
// database/sql view of pool. closeAll releases both; closing the sql.DB does
// not close pool.
func newMigrate(ctx context.Context, pool *pgxpool.Pool) (*migrate.Migrate, func() error, error) {
	src, err := iofs.New(migrationFiles, "migrations")
	if err != nil {
		return nil, nil, fmt.Errorf("schema: read embedded migrations: %w", err)
	}
	db := stdlib.OpenDBFromPool(pool)
	drv, err := migratepgx.WithInstance(db, &migratepgx.Config{MigrationsTable: MigrationsTable})
	if err != nil {
		_ = src.Close()
		_ = db.Close()
		return nil, nil, fmt.Errorf("schema: open migration driver: %w", err)
	}
	m, err := migrate.NewWithInstance("iofs", src, "pgx5", drv)
	if err != nil {
		_ = src.Close()
		_ = drv.Close()
		return nil, nil, fmt.Errorf("schema: prepare migrations: %w", err)
	}
	closeAll := func() error {
		srcErr, dbErr := m.Close()
		return errors.Join(srcErr, dbErr)
	}
	return m, closeAll, nil
}
