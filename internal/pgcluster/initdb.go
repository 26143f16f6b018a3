package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Init creates a cluster in opts.DataDir with initdb unless the directory
// holds one already (has a PG_VERSION file), and does not start it. Start
// calls it; it is exported for callers that prepare a data directory once
// and copy it, as the test harness does. It creates the parent directories
// like Start and fails with ErrInUse when another process holds the data
// directory. Of the options it uses DataDir, Durable, BinDir and Logf.
func Init(ctx context.Context, opts Options) error {
	c, err := opts.resolve(ctx)
	if err != nil {
		return err
	}
	su, err := lookupServerUser()
	if err != nil {
		return err
	}
	if err := prepareParent(c, su); err != nil {
		return err
	}
	lock, err := lockDataDir(c.lockPath())
	if err != nil {
		return err
	}
	defer lock.unlock()
	return initialize(ctx, c, su)
}

// isCluster reports whether dataDir holds an initialised cluster.
func isCluster(dataDir string) (bool, error) {
	_, err := os.Stat(filepath.Join(dataDir, "PG_VERSION"))
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, fmt.Errorf("pgcluster: %w", err)
}

// initialize runs initdb unless the data directory holds a cluster. It runs
// initdb on a sibling directory and renames it into place, so a data
// directory with PG_VERSION is always complete even if initdb was killed.
// The caller must hold the data directory's lock.
func initialize(ctx context.Context, c config, su *serverUser) error {
	if ok, err := isCluster(c.DataDir); err != nil || ok {
		return err
	}
	if entries, err := os.ReadDir(c.DataDir); err == nil && len(entries) > 0 {
		return fmt.Errorf("pgcluster: data directory %s is not empty but holds no PostgreSQL cluster (no PG_VERSION); remove it or choose another", c.DataDir)
	} else if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: %w", err)
	}

	tmp := c.DataDir + ".initdb"
	if err := os.RemoveAll(tmp); err != nil {
		return fmt.Errorf("pgcluster: remove leftover %s: %w", tmp, err)
	}
	if _, err := su.mkdir(tmp); err != nil {
		return err
	}
	args := []string{
		"-D", tmp,
		"--auth=trust", // safe only because the server listens on a private socket and loopback
		"--username=postgres",
		"--encoding=UTF8",
		"--locale=C",
	}
	if !c.Durable {
		args = append(args, "--no-sync")
	}
	c.Logf("initdb %s", c.DataDir)
	cmd := su.command(ctx, filepath.Dir(c.DataDir), c.bin("initdb"), args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("pgcluster: initdb %s: %w: %s", c.DataDir, err, tail(strings.TrimSpace(string(out)), 2000))
	}
	// Renaming over an empty directory is allowed, so a data directory
	// created in advance is fine.
	if err := os.Rename(tmp, c.DataDir); err != nil {
		_ = os.RemoveAll(tmp)
		return fmt.Errorf("pgcluster: move initialised cluster into place: %w", err)
	}
	return nil
}

// prepareParent creates the data directory's parent when missing and, when
// the server runs as another user, checks that user can reach it.
func prepareParent(c config, su *serverUser) error {
	parent := filepath.Dir(c.DataDir)
	if err := os.MkdirAll(parent, 0o755); err != nil {
		return fmt.Errorf("pgcluster: create %s: %w", parent, err)
	}
	return su.checkTraversable(parent)
}
