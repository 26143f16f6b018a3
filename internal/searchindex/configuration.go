// Package searchindex holds the lexical search side of stored mail: the
// extracted metadata and search document written for each message, the text
// search configuration compiled into the document's generated tsvector
// column, and the queries that search it.
package searchindex

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/config"
)

// Querier is what the read functions run on: a pool, a connection or a
// transaction.
type Querier interface {
	Exec(ctx context.Context, sql string, args ...any) (pgconn.CommandTag, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

var configurationInExpr = regexp.MustCompile(`to_tsvector\('([^']+)'::regconfig`)

// CompiledConfiguration reads the text search configuration the search
// vector column was generated with, from PostgreSQL's own catalogue.
func CompiledConfiguration(ctx context.Context, q Querier) (string, error) {
	var expr string
	err := q.QueryRow(ctx, `
		SELECT pg_get_expr(d.adbin, d.adrelid)
		FROM pg_attrdef d
		JOIN pg_attribute a ON a.attrelid = d.adrelid AND a.attnum = d.adnum
		WHERE d.adrelid = 'email_search_documents'::regclass AND a.attname = 'search_vector'`).Scan(&expr)
	if err != nil {
		return "", fmt.Errorf("searchindex: read the search vector's definition: %w", err)
	}
	found := configurationInExpr.FindAllStringSubmatch(expr, -1)
	if len(found) == 0 {
		return "", errors.New("searchindex: the search vector's definition names no text search configuration")
	}
	name := found[0][1]
	for _, f := range found[1:] {
		if f[1] != name {
			return "", fmt.Errorf("searchindex: the search vector mixes text search configurations %q and %q", name, f[1])
		}
	}
	return name, nil
}

// ConfigurationMismatchError is the startup gate's refusal: the configured
// text search configuration is not the one the stored documents were
// indexed with.
type ConfigurationMismatchError struct {
	Configured, Compiled string
}

func (e *ConfigurationMismatchError) Error() string {
	return fmt.Sprintf("MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION is %q but the search documents are indexed with %q; "+
		"either set it back to %q, or rebuild the index under the new one with `mailfathom reindex-search` (it recomputes every search document)",
		e.Configured, e.Compiled, e.Compiled)
}

// CheckConfiguration refuses a configured text search configuration that
// differs from the one compiled into the column: queries stemmed one way
// against lexemes stored another would return fewer results, silently.
func CheckConfiguration(ctx context.Context, q Querier, configured string) error {
	compiled, err := CompiledConfiguration(ctx, q)
	if err != nil {
		return err
	}
	if compiled != configured {
		return &ConfigurationMismatchError{Configured: configured, Compiled: compiled}
	}
	return nil
}

// Rebuild recompiles the search vector column and its index under
// configuration, recomputing every stored document, in one transaction. It
// is the remedy CheckConfiguration names. Only the configurations a stock
// PostgreSQL ships are accepted.
func Rebuild(ctx context.Context, pool *pgxpool.Pool, configuration string) error {
	if !slices.Contains(config.TextSearchConfigurations, configuration) {
		return fmt.Errorf("searchindex: %q is not a text search configuration stock PostgreSQL ships", configuration)
	}
	// The name is one of a fixed list of lower-case words, so it can be
	// written into the DDL, which takes no parameters.
	expr := fmt.Sprintf(`setweight(to_tsvector('%[1]s'::regconfig, coalesce(subject, '')), 'A') ||
		setweight(to_tsvector('%[1]s'::regconfig, coalesce(participants, '')), 'B') ||
		to_tsvector('%[1]s'::regconfig, coalesce(body_text, ''))`, configuration)
	return pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, stmt := range []string{
			`DROP INDEX IF EXISTS ix_email_search_documents_vector`,
			`ALTER TABLE email_search_documents DROP COLUMN search_vector`,
			// The vector stays compressed in its row (see
			// mailfathom_search): a check against a query then reads one
			// page rather than the TOAST table's chunks.
			`ALTER TABLE email_search_documents ADD COLUMN search_vector tsvector GENERATED ALWAYS AS (` + expr + `) STORED,
				ALTER COLUMN search_vector SET STORAGE MAIN, ALTER COLUMN search_vector SET COMPRESSION lz4`,
			`CREATE INDEX ix_email_search_documents_vector ON email_search_documents USING gin (search_vector)`,
		} {
			if _, err := tx.Exec(ctx, stmt); err != nil {
				return fmt.Errorf("searchindex: rebuild: %w", err)
			}
		}
		return nil
	})
}
