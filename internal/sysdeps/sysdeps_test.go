package sysdeps_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/sysdeps"
)

func TestLibraryFindsAnInstalledSoname(t *testing.T) {
	t.Parallel()
	paths, err := sysdeps.Ensure(context.Background(), t.Logf, sysdeps.Library("libc.so.6", "libc6"))
	require.NoError(t, err)
	require.FileExists(t, paths[0])
}

func TestLibraryMissingNamesItsPackage(t *testing.T) {
	t.Parallel()
	req := sysdeps.Library("libmailfathom-absent.so.0", "mailfathom-absent-package")
	_, err := req.Find()
	require.Error(t, err)
	require.Contains(t, err.Error(), "libmailfathom-absent.so.0")
}

// TestDownloadLeavesTheDebFile fetches a small package the Cyrus harness
// needs anyway and finds its .deb where Download says.
func TestDownloadLeavesTheDebFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	paths, err := sysdeps.Download(context.Background(), t.Logf, dir, "sasl2-bin")
	require.NoError(t, err)
	require.Len(t, paths, 1)
	require.Equal(t, dir, filepath.Dir(paths[0]))
	require.True(t, strings.HasPrefix(filepath.Base(paths[0]), "sasl2-bin_"), paths[0])
	require.FileExists(t, paths[0])
}
