package pgtest

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
)

// rootEnv names an environment variable that overrides the directory
// under which workRoot creates its directory.
const rootEnv = "MAILFATHOM_PGTEST_DIR"

// shmMinFree is how much free space /dev/shm needs for the clusters to go
// there. PostgreSQL also allocates its dynamic shared memory in /dev/shm,
// so a small one (Docker's default is 64 MiB) is left alone.
const shmMinFree = 2 << 30

// tmpfsMagic is the f_type statfs reports for tmpfs.
const tmpfsMagic = 0x01021994

// workBase returns the directory workRoot creates its directory in: $rootEnv
// when set; otherwise /dev/shm when it is a tmpfs with shmMinFree free,
// since a cluster in memory creates databases about three times faster than
// one on disk (measured on ext4: CREATE DATABASE 55 ms vs 165 ms); otherwise
// os.TempDir().
func workBase() string {
	if dir := os.Getenv(rootEnv); dir != "" {
		return dir
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs("/dev/shm", &st); err == nil && st.Type == tmpfsMagic && st.Bavail*uint64(st.Bsize) >= shmMinFree {
		return "/dev/shm"
	}
	return os.TempDir()
}

// workRoot returns the directory shared by the test binaries of this user,
// workBase()/mailfathom-pgtest-<uid>, mode 0755 so that the postgres account
// can traverse it when the tests run as root. It refuses a path that is a
// symlink or belongs to another user, since the directory is in a
// world-writable place.
func workRoot() (string, error) {
	root := filepath.Join(workBase(), fmt.Sprintf("mailfathom-pgtest-%d", os.Geteuid()))
	if err := os.Mkdir(root, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	fi, err := os.Lstat(root)
	if err != nil {
		return "", fmt.Errorf("pgtest: %w", err)
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !fi.IsDir() || !ok || int(st.Uid) != os.Geteuid() {
		return "", fmt.Errorf("pgtest: %s is not a directory owned by this user; remove it", root)
	}
	if fi.Mode().Perm() != 0o755 {
		if err := os.Chmod(root, 0o755); err != nil {
			return "", fmt.Errorf("pgtest: %w", err)
		}
	}
	return root, nil
}

// runDir is one test binary's directory under the work root: its cluster's
// data directory, socket directory and log, and owner.lock, which the binary
// holds (flock) for as long as it lives.
type runDir struct {
	path  string
	owner *os.File
}

func (r *runDir) dataDir() string { return filepath.Join(r.path, "data") }

// remove deletes the directory and then drops the ownership lock.
func (r *runDir) remove() error {
	err := os.RemoveAll(r.path)
	r.owner.Close()
	if err != nil {
		return fmt.Errorf("pgtest: remove %s: %w", r.path, err)
	}
	return nil
}

// claimRunDir creates this binary's run directory and returns it with the
// path of the seed data directory to copy. Holding the work root's lock, it
// first reaps the run directories of binaries that died and builds the seed
// if needed, so that concurrent binaries neither reap a directory being set
// up nor build the seed twice.
func claimRunDir(ctx context.Context, root, binDir string, logf func(string, ...any)) (*runDir, string, error) {
	lock, err := lockWait(ctx, filepath.Join(root, "lock"))
	if err != nil {
		return nil, "", err
	}
	defer lock.Close()

	reapOrphans(ctx, root, binDir, logf)
	seed, err := ensureSeed(ctx, root, binDir, logf)
	if err != nil {
		return nil, "", err
	}
	path, err := os.MkdirTemp(root, "run-")
	if err != nil {
		return nil, "", fmt.Errorf("pgtest: %w", err)
	}
	if err := os.Chmod(path, 0o755); err != nil {
		os.RemoveAll(path)
		return nil, "", fmt.Errorf("pgtest: %w", err)
	}
	owner, err := openLock(filepath.Join(path, "owner.lock"))
	if err == nil {
		var ok bool
		if ok, err = tryLock(owner); !ok && err == nil {
			err = errors.New("pgtest: a fresh owner.lock is already locked")
		}
		if err != nil {
			owner.Close()
		}
	}
	if err != nil {
		os.RemoveAll(path)
		return nil, "", err
	}
	return &runDir{path: path, owner: owner}, seed, nil
}

// reapOrphans stops the clusters of run directories whose owner.lock no
// process holds and removes those directories. Failures are logged, not
// returned: a leftover must not fail the tests of another package. The
// caller holds the work root's lock.
func reapOrphans(ctx context.Context, root, binDir string, logf func(string, ...any)) {
	entries, err := os.ReadDir(root)
	if err != nil {
		logf("pgtest: list %s: %v", root, err)
		return
	}
	for _, e := range entries {
		if !e.IsDir() || !strings.HasPrefix(e.Name(), "run-") {
			continue
		}
		path := filepath.Join(root, e.Name())
		owner, err := os.OpenFile(filepath.Join(path, "owner.lock"), os.O_RDWR, 0)
		if err == nil {
			ok, err := tryLock(owner)
			if !ok || err != nil {
				owner.Close()
				continue // a live binary's directory
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			logf("pgtest: %v", err)
			continue
		}
		// The owner died (or died before creating owner.lock).
		dataDir := filepath.Join(path, "data")
		if _, err := os.Stat(dataDir); err == nil {
			logf("pgtest: stopping the cluster of a test binary that died: %s", path)
			if err := pgcluster.StopOrphan(ctx, pgcluster.Options{DataDir: dataDir, BinDir: binDir, Logf: logf}); err != nil {
				logf("pgtest: %v", err)
				if owner != nil {
					owner.Close()
				}
				continue
			}
		}
		if err := os.RemoveAll(path); err != nil {
			logf("pgtest: remove %s: %v", path, err)
		}
		if owner != nil {
			owner.Close()
		}
	}
}
