package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// livePostmaster returns the PID of a postmaster running on dataDir, or 0.
//
// It recognises the postmaster by its working directory, which a postmaster
// sets to its data directory. When postmaster.pid names a live process that
// is something else (the PID was reused after a crash or a reboot), postgres
// would refuse to start, so livePostmaster removes the stale file. A file
// naming a dead process is left alone: postgres handles that case itself and
// its shared-memory interlock needs the file. The caller must hold the data
// directory's lock.
func livePostmaster(dataDir string, logf func(string, ...any)) (int, error) {
	pidFile := filepath.Join(dataDir, "postmaster.pid")
	b, err := os.ReadFile(pidFile)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("pgcluster: %w", err)
	}
	line, _, _ := strings.Cut(string(b), "\n")
	pid, err := strconv.Atoi(strings.TrimSpace(line))
	if err != nil || pid <= 0 {
		// An empty or torn file left by a crash during start-up.
		logf("removing unreadable %s", pidFile)
		return 0, removeStale(pidFile)
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil // dead: postgres copes
	}
	real, rerr := filepath.EvalSymlinks(dataDir)
	if rerr != nil {
		return 0, fmt.Errorf("pgcluster: %w", rerr)
	}
	if err == nil && cwd == real {
		return pid, nil
	}
	logf("removing stale %s: pid %d is not a server on this data directory", pidFile, pid)
	return 0, removeStale(pidFile)
}

func removeStale(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("pgcluster: remove stale %s: %w", path, err)
	}
	return nil
}

// stopOrphan stops a server that runs on the data directory although no live
// process holds its lock, which the caller now holds: the process that
// started it died without stopping it.
func stopOrphan(ctx context.Context, c config, su *serverUser) error {
	pid, err := livePostmaster(c.DataDir, c.Logf)
	if err != nil || pid == 0 {
		return err
	}
	c.Logf("stopping server (pid %d) on %s left running by a process that exited", pid, c.DataDir)
	return stopServer(ctx, c, su)
}

// stopServer stops the server on the data directory with a fast shutdown,
// falling back to an immediate one (crash recovery at the next start), and
// waits until it is gone. A server that is not running is not an error.
func stopServer(ctx context.Context, c config, su *serverUser) error {
	var errs []error
	for _, mode := range []string{"fast", "immediate"} {
		out, err := pgCtl(ctx, c, su, "stop", "-D", c.DataDir, "-m", mode, "-w", "-t", "60")
		if err == nil {
			return nil
		}
		pid, perr := livePostmaster(c.DataDir, c.Logf)
		if perr == nil && pid == 0 {
			return nil
		}
		errs = append(errs, fmt.Errorf("pg_ctl stop -m %s: %w: %s", mode, err, out))
		if ctx.Err() != nil {
			break
		}
	}
	return fmt.Errorf("pgcluster: stop server on %s: %w", c.DataDir, errors.Join(errs...))
}

// pgCtl runs pg_ctl as su and returns its trimmed output.
func pgCtl(ctx context.Context, c config, su *serverUser, args ...string) (string, error) {
	cmd := su.command(ctx, filepath.Dir(c.DataDir), c.bin("pg_ctl"), args...)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	return strings.TrimSpace(string(out)), err
}
