package main

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestSearchAndReindexCommands runs `mailfathom search` and
// `mailfathom reindex-search` against a database holding one indexed
// message of account primary.
func TestSearchAndReindexCommands(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()

	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	b, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: b.ID, UIDValidity: 1, UID: 1,
		Size: 10, Subject: "Quarterly running numbers", Raw: []byte("x"), Availability: mailstore.Available})
	require.NoError(t, err)
	require.NoError(t, searchindex.Write(ctx, pool, searchindex.Record{StoredEmailID: id, Readable: true,
		Subject: "Quarterly running numbers", TextSource: searchindex.SourcePlainText, Text: "the pelican budget"}))

	pw := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pw, []byte("x"), 0o600))
	env := []string{
		"MAILFATHOM_DATABASE_URL=" + url,
		"MAILFATHOM_UI_ENABLED=false",
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:" + pw,
	}
	code, stdout, stderr := runCmd(t, env, "search", "pelican")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Quarterly running numbers")
	require.Contains(t, stdout, "primary/INBOX")

	code, stdout, stderr = runCmd(t, env, "search", "-mode", "lexical", "pelican")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Quarterly running numbers")

	// Searching by meaning needs a profile; an unknown mode is a usage
	// error.
	code, _, stderr = runCmd(t, env, "search", "-mode", "semantic", "pelican")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "-mode semantic needs an embedding profile")
	code, _, stderr = runCmd(t, env, "search", "-mode", "fuzzy", "pelican")
	require.Equal(t, 2, code)
	require.Contains(t, stderr, "-mode must be lexical, semantic or hybrid")

	code, stdout, _ = runCmd(t, env, "search", "-alias", "archive", "pelican")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "no matching messages")

	// Without accounts, or naming one that is not configured, search says
	// so instead of finding nothing.
	code, _, stderr = runCmd(t, env[:2], "search", "pelican")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no account is configured")
	require.Contains(t, stderr, "MAILFATHOM_ACCOUNTS_0_ID")
	code, _, stderr = runCmd(t, env, "search", "-account", "secondary", "pelican")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, `-account "secondary" is not a configured account; configured: primary`)

	// With a profile whose provider refuses the query, the default hybrid
	// search answers by words and says so; semantic fails.
	provider := embedtest.Start(t, embedtest.Options{Dimensions: 16})
	provider.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized})
	profiled := append(slices.Clone(env), "MAILFATHOM_EMBEDDING_PROVIDER_URL="+provider.URL,
		"MAILFATHOM_EMBEDDING_MODEL=test-model", "MAILFATHOM_EMBEDDING_DIMENSIONS=16")
	code, stdout, stderr = runCmd(t, profiled, "search", "pelican")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Quarterly running numbers")
	require.Contains(t, stderr, "ranked by words alone, not by meaning: the embedding provider did not embed the query [EmbeddingRequestRefused]")
	code, stdout, stderr = runCmd(t, env, "search", "-mode", "hybrid", "pelican")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Quarterly running numbers")
	require.Contains(t, stderr, "ranked by words alone, not by meaning: no embedding profile is configured")
	code, _, stderr = runCmd(t, profiled, "search", "-mode", "semantic", "pelican")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "-mode lexical or hybrid searches without the provider")

	// Re-indexing under english makes stemmed queries match.
	english := append(env, "MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION=english")
	code, stdout, stderr = runCmd(t, english, "reindex-search")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, `"simple" → "english"`)
	code, stdout, stderr = runCmd(t, english, "search", "run")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "Quarterly running numbers")
}
