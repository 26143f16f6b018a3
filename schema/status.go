package schema

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/golang-migrate/migrate/v4/source/iofs"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// Status reads the applied versions without changing anything. It is cheap
// enough for a readiness probe: two small queries.
func Status(ctx context.Context, pool *pgxpool.Pool) (Versions, error) {
	var v Versions
	var err error
	if v.SchemaLatest, err = latestSchemaVersion(); err != nil {
		return Versions{}, err
	}
	var version int64
	err = pool.QueryRow(ctx, "SELECT version, dirty FROM "+MigrationsTable+" LIMIT 1").Scan(&version, &v.SchemaDirty)
	switch {
	case errors.Is(err, pgx.ErrNoRows), isUndefinedTable(err):
		v.Schema = 0
	case err != nil:
		return Versions{}, fmt.Errorf("schema: read schema version: %w", err)
	default:
		v.Schema = uint(version)
	}

	riverMigrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return Versions{}, fmt.Errorf("schema: river migrator: %w", err)
	}
	all := riverMigrator.AllVersions()
	if len(all) > 0 {
		v.RiverLatest = all[len(all)-1].Version
	}
	existing, err := riverMigrator.ExistingVersions(ctx)
	if err != nil && !isUndefinedTable(err) {
		return Versions{}, fmt.Errorf("schema: read river version: %w", err)
	}
	if len(existing) > 0 {
		v.River = existing[len(existing)-1].Version
	}
	return v, nil
}

// latestSchemaVersion walks the embedded migrations for the newest version.
func latestSchemaVersion() (uint, error) {
	src, err := iofs.New(migrationFiles, "migrations")
	if err != nil {
		return 0, fmt.Errorf("schema: read embedded migrations: %w", err)
	}
	defer src.Close()
	v, err := src.First()
	if err != nil {
		return 0, fmt.Errorf("schema: no embedded migrations: %w", err)
	}
	for {
		next, err := src.Next(v)
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, fs.ErrNotExist) {
			return v, nil
		}
		if err != nil {
			return 0, fmt.Errorf("schema: walk embedded migrations: %w", err)
		}
		v = next
	}
}

func isUndefinedTable(err error) bool {
	var pgErr *pgconn.PgError
	return errors.As(err, &pgErr) && pgErr.Code == "42P01"
}
