package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// maxIdentifier is PostgreSQL's limit on a name, in bytes.
const maxIdentifier = 63

// dbTimeout bounds creating or dropping one database.
const dbTimeout = time.Minute

// buildTimeout bounds one TemplateDatabase builder.
const buildTimeout = 5 * time.Minute

// Database creates an empty database for t and returns a postgres:// URL
// that connects to it as the superuser over the cluster's unix socket (see
// pgcluster.Cluster.ConnString). The database is dropped, with any open
// connections, when t ends. It fails t when the cluster cannot start or the
// database cannot be created. The package's TestMain must call Main.
func Database(t testing.TB) string {
	t.Helper()
	return get(t).createDatabase(t, "")
}

// Pool is Database followed by pgxpool.New: it returns a pool connected to a
// fresh database, closed before the database is dropped when t ends.
func Pool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := Database(t)
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		t.Fatalf("pgtest: connect to %s: %v", url, err)
	}
	t.Cleanup(pool.Close)
	return pool
}

// TemplateDatabase is Database, except that the new database is a copy of a
// template that build fills, e.g. by applying migrations. The first call
// with a given key in the test binary creates an empty template database and
// calls build with a URL for it; later calls with that key reuse it, so key
// must name what build produces (e.g. "schema" or "schema-v3") and the
// build of later calls is ignored. build must close its connections; any
// left open are terminated, and the template then refuses connections. A
// failing build fails every test that asks for the key.
func TemplateDatabase(t testing.TB, key string, build func(ctx context.Context, url string) error) string {
	t.Helper()
	s := get(t)
	v, _ := templates.LoadOrStore(key, &template{})
	tmpl := v.(*template)
	tmpl.once.Do(func() {
		tmpl.err = errors.New("builder panicked")
		tmpl.name, tmpl.err = s.buildTemplate(key, build)
	})
	if tmpl.err != nil {
		t.Fatalf("pgtest: build template database %q: %v", key, tmpl.err)
	}
	return s.createDatabase(t, tmpl.name)
}

// templates holds a *template per TemplateDatabase key.
var templates sync.Map

type template struct {
	once sync.Once
	name string
	err  error
}

func (s *server) buildTemplate(key string, build func(ctx context.Context, url string) error) (string, error) {
	sum := sha256.Sum256([]byte(key))
	name := identifier("tmpl_"+key, "_"+hex.EncodeToString(sum[:4]))
	ctx, cancel := context.WithTimeout(context.Background(), buildTimeout)
	defer cancel()
	if _, err := s.admin.Exec(ctx, "CREATE DATABASE "+quote(name)); err != nil {
		return "", fmt.Errorf("create %s: %w", name, err)
	}
	if err := build(ctx, s.cluster.ConnString(name)); err != nil {
		_, _ = s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quote(name)+" WITH (FORCE)")
		return "", err
	}
	// A copy fails while anyone is connected to the template.
	if _, err := s.admin.Exec(ctx, "ALTER DATABASE "+quote(name)+" WITH ALLOW_CONNECTIONS false"); err != nil {
		return "", fmt.Errorf("seal %s: %w", name, err)
	}
	if _, err := s.admin.Exec(ctx, "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1", name); err != nil {
		return "", fmt.Errorf("disconnect from %s: %w", name, err)
	}
	return name, nil
}

// createDatabase creates a database for t, a copy of the database named
// from (template1 when ""), and drops it when t ends.
func (s *server) createDatabase(t testing.TB, from string) string {
	t.Helper()
	name := databaseName(t.Name())
	sql := "CREATE DATABASE " + quote(name)
	if from != "" {
		sql += " TEMPLATE " + quote(from)
	}
	ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
	defer cancel()
	if _, err := s.admin.Exec(ctx, sql); err != nil {
		t.Fatalf("pgtest: %s: %v", sql, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), dbTimeout)
		defer cancel()
		if _, err := s.admin.Exec(ctx, "DROP DATABASE IF EXISTS "+quote(name)+" WITH (FORCE)"); err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return s.cluster.ConnString(name)
}

var dbCounter atomic.Int64

// databaseName derives a database name unique in this binary from a test
// name, e.g. "t_testfoo_sub_case_12".
func databaseName(testName string) string {
	return identifier("t_"+testName, fmt.Sprintf("_%d", dbCounter.Add(1)))
}

// identifier lowercases base, replaces runs of characters other than
// [a-z0-9_] with "_", and appends suffix, cutting base so that the result
// fits in maxIdentifier bytes.
func identifier(base, suffix string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(base) {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		case !strings.HasSuffix(b.String(), "_"):
			b.WriteByte('_')
		}
	}
	s := b.String()
	if len(s) > maxIdentifier-len(suffix) {
		s = s[:maxIdentifier-len(suffix)]
	}
	return strings.TrimRight(s, "_") + suffix
}

func quote(name string) string { return pgx.Identifier{name}.Sanitize() }
