package pgtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
)

// ensureSeed returns the data directory of a freshly initialised cluster for
// the PostgreSQL in binDir, creating it under root the first time. Copying it
// (39 MB) takes 0.04 s on tmpfs and 0.15-0.5 s on ext4, against 0.6-1.1 s
// for initdb. The seed is named for
// the server's version and binDir, so an upgrade gets a new one; old seeds
// are left in place. The caller holds the work root's lock.
func ensureSeed(ctx context.Context, root, binDir string, logf func(string, ...any)) (string, error) {
	key, err := seedKey(ctx, binDir)
	if err != nil {
		return "", err
	}
	final := filepath.Join(root, "seed-"+key)
	if _, err := os.Stat(filepath.Join(final, "data", "PG_VERSION")); err == nil {
		return filepath.Join(final, "data"), nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", fmt.Errorf("pgtest: %w", err)
	}

	// Build beside it and rename, so a seed that exists is complete.
	building := final + ".building"
	if err := os.RemoveAll(building); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if err := os.RemoveAll(final); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	if err := os.Mkdir(building, 0o755); err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	logf("pgtest: initialising the seed data directory %s", final)
	err = pgcluster.Init(ctx, pgcluster.Options{DataDir: filepath.Join(building, "data"), BinDir: binDir, Logf: logf})
	if err == nil {
		err = os.Rename(building, final)
	}
	if err != nil {
		os.RemoveAll(building)
		return "", fmt.Errorf("pgtest: build seed data directory: %w", err)
	}
	return filepath.Join(final, "data"), nil
}

// seedKey names a seed: the server version with a hash of it and binDir,
// e.g. "15.13-1a2b3c4d".
func seedKey(ctx context.Context, binDir string) (string, error) {
	out, err := exec.CommandContext(ctx, filepath.Join(binDir, "postgres"), "--version").Output()
	if err != nil {
		return "", fmt.Errorf("pgtest: postgres --version: %w", err)
	}
	line := strings.TrimSpace(string(out)) // "postgres (PostgreSQL) 15.13 (Debian 15.13-0+deb12u1)"
	version := "unknown"
	if f := strings.Fields(line); len(f) >= 3 {
		version = strings.Map(func(r rune) rune {
			if r >= '0' && r <= '9' || r == '.' {
				return r
			}
			return -1
		}, f[2])
	}
	sum := sha256.Sum256([]byte(binDir + "\n" + line))
	return version + "-" + hex.EncodeToString(sum[:4]), nil
}

// copyDataDir copies the seed to dst with cp -a, which keeps the owner
// (the postgres account when the tests run as root) and the modes the server
// checks.
func copyDataDir(ctx context.Context, seed, dst string) error {
	if out, err := exec.CommandContext(ctx, "cp", "-a", seed, dst).CombinedOutput(); err != nil {
		return fmt.Errorf("pgtest: copy seed data directory: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
