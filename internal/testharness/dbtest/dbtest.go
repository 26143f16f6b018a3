// Package dbtest gives a test its own PostgreSQL database with MailFathom's
// schema and River's tables already applied.
//
// The migrations run once per test binary into a template database; every
// test then gets a copy, which is far cheaper than migrating per test.
package dbtest

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/schema"
)

// URL returns the connection string of a fresh, fully migrated database that
// is dropped when the test ends.
func URL(t testing.TB) string {
	t.Helper()
	return pgtest.TemplateDatabase(t, "mailfathom-schema", func(ctx context.Context, url string) error {
		pool, err := pgxpool.New(ctx, url)
		if err != nil {
			return err
		}
		defer pool.Close()
		_, err = schema.Migrate(ctx, pool, nil)
		return err
	})
}

// Pool returns a pool on a fresh, fully migrated database; the pool is
// closed and the database dropped when the test ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	pool, err := pgxpool.New(context.Background(), URL(t))
	if err != nil {
		t.Fatalf("dbtest: open pool: %v", err)
	}
	t.Cleanup(pool.Close)
	return pool
}
