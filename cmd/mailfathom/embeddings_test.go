package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/vectortest"
)

// TestEmbeddingsPrune stores 40 messages' passages embedded under an old
// profile and again under the configured one: `mailfathom embeddings
// prune` removes the old profile's vectors in batches of -batch and its
// record, and leaves the configured profile's as they were.
func TestEmbeddingsPrune(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	gen := vectortest.NewGenerator(5, 0, 16, 1)
	old := vectortest.Seed(t, ctx, pool, vectortest.Layout{Emails: 40, PerEmail: 3, Model: "old-model"}, gen.Passage).Profile
	active, err := searchindex.EnsureProfile(ctx, pool, "new-model", 16)
	require.NoError(t, err)
	dbassert.CopyVectors(t, pool, old, active)
	vectors := func(profile int16) int { return dbassert.VectorCount(t, pool, profile) }
	require.Equal(t, 120, vectors(old))

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
	code, _, stderr := runCmd(t, env, "embeddings", "prune")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no profile is configured")
	require.Equal(t, 120, vectors(old), "nothing removed without a profile to keep")
	code, _, _ = runCmd(t, env, "embeddings", "prune", "-batch", "0")
	require.Equal(t, 2, code)

	env = append(env, "MAILFATHOM_EMBEDDING_PROVIDER_URL=http://127.0.0.1:1", "MAILFATHOM_EMBEDDING_MODEL=new-model",
		"MAILFATHOM_EMBEDDING_DIMENSIONS=16")
	code, stdout, stderr := runCmd(t, env, "embeddings", "prune", "-batch", "7")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "kept profile 2 (new-model, 16 dimensions): the active one")
	require.Contains(t, stdout, "removed profile 1 (old-model, 16 dimensions): 120 vectors")
	require.Zero(t, vectors(old))
	require.Equal(t, 120, vectors(active))
	require.Zero(t, dbassert.SignatureCount(t, pool, old))
	profiles, err := searchindex.Profiles(ctx, pool)
	require.NoError(t, err)
	require.Len(t, profiles, 1)

	code, stdout, _ = runCmd(t, env, "embeddings", "prune")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "nothing to prune")
}
