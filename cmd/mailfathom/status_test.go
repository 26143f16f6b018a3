package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/vectortest"
)

// TestStatusShowsRefusedPassages: `mailfathom status` says how many
// passages the embedding provider refused under the active profile, in
// all and per account, beside the messages awaiting vectors.
func TestStatusShowsRefusedPassages(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	url := dbtest.URL(t)
	pool, err := pgxpool.New(ctx, url)
	require.NoError(t, err)
	defer pool.Close()
	gen := vectortest.NewGenerator(7, 0, 16, 1)
	seeded := vectortest.Seed(t, ctx, pool, vectortest.Layout{Emails: 3, PerEmail: 2, Model: "test-model"}, gen.Passage)
	// The provider refused one passage: it has no vector and a refusal.
	first := seeded.Emails[0].ID
	dbassert.ForgetVector(t, pool, first, 1)
	pending, err := searchindex.PassagesAwaitingVectors(ctx, pool, seeded.Profile, []uuid.UUID{first})
	require.NoError(t, err)
	require.Len(t, pending, 1)
	_, err = searchindex.RecordRefusals(ctx, pool, seeded.Profile, []searchindex.PassageRefusal{{Passage: pending[0], Status: 413}})
	require.NoError(t, err)

	pw := filepath.Join(t.TempDir(), "pw")
	require.NoError(t, os.WriteFile(pw, []byte("x"), 0o600))
	env := []string{
		"MAILFATHOM_DATABASE_URL=" + url,
		"MAILFATHOM_UI_ENABLED=false",
		"MAILFATHOM_ACCOUNTS_0_ID=primary",
		"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=file:" + pw,
		"MAILFATHOM_EMBEDDING_PROVIDER_URL=http://127.0.0.1:1",
		"MAILFATHOM_EMBEDDING_MODEL=test-model",
		"MAILFATHOM_EMBEDDING_DIMENSIONS=16",
	}
	code, stdout, stderr := runCmd(t, env, "status")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "0 messages awaiting vectors, 1 passages refused by the provider")
	require.Contains(t, stdout, "primary: 1 passage(s) refused by the embedding provider")
}

// TestEmbeddingLine: the status line names the model the profile's
// vectors are of once an answer named one.
func TestEmbeddingLine(t *testing.T) {
	t.Parallel()
	e := &status.Embedding{Model: "nomic-embed-text", Dimensions: 768, BacklogJobs: 2, AwaitingMessages: 5}
	require.Equal(t, "embedding nomic-embed-text (768 dimensions): 2 embed jobs waiting, 5 messages awaiting vectors, 0 passages refused by the provider", embeddingLine(e))
	e.AnsweredModel = "nomic-embed-text:latest"
	require.Equal(t, "embedding nomic-embed-text (768 dimensions; vectors of model nomic-embed-text:latest, as the provider answered): "+
		"2 embed jobs waiting, 5 messages awaiting vectors, 0 passages refused by the provider", embeddingLine(e))
}
