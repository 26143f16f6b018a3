package main

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/status"
)

// TestEmbeddingLine: the status line names the model the profile's
// vectors are of once an answer named one.
func TestEmbeddingLine(t *testing.T) {
	t.Parallel()
	e := &status.Embedding{Model: "nomic-embed-text", Dimensions: 768, BacklogJobs: 2, AwaitingMessages: 5}
	require.Equal(t, "embedding nomic-embed-text (768 dimensions): 2 embed jobs waiting, 5 messages awaiting vectors", embeddingLine(e))
	e.AnsweredModel = "nomic-embed-text:latest"
	require.Equal(t, "embedding nomic-embed-text (768 dimensions; vectors of model nomic-embed-text:latest, as the provider answered): "+
		"2 embed jobs waiting, 5 messages awaiting vectors", embeddingLine(e))
}
