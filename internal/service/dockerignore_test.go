package service_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestDockerignore: the image build's context leaves out the repository's
// history and the embedded default's directory, which holds a database and
// a generated River UI password.
func TestDockerignore(t *testing.T) {
	t.Parallel()
	b, err := os.ReadFile(filepath.Join("..", "..", ".dockerignore"))
	require.NoError(t, err)
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			patterns = append(patterns, strings.TrimPrefix(line, "/"))
		}
	}
	for _, p := range []string{".git", ".mailfathom"} {
		require.Contains(t, patterns, p)
	}
}
