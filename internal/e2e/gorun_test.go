package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/stretchr/testify/require"
)

// TestGoRunStopsWithItsParent runs the README's command, `go run
// ./cmd/mailfathom serve`, on the embedded database, and sends SIGTERM to
// the go process, as a process manager or a terminal closing would: serve
// and the PostgreSQL it started stop with it, instead of running on.
func TestGoRunStopsWithItsParent(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "mailfathom-gorun-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	dataDir := filepath.Join(dir, "postgres")

	cmd := exec.Command("go", "run", "./cmd/mailfathom", "serve")
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(),
		"MAILFATHOM_EMBEDDED_DATA_DIR="+dataDir, "MAILFATHOM_HTTP_ADDR=127.0.0.1:0", "MAILFATHOM_LOG_FORMAT=json")
	// A file, as a terminal would be: it outlives go run, so serve can go
	// on logging while it stops.
	logPath := filepath.Join(dir, "serve.log")
	logFile, err := os.Create(logPath)
	require.NoError(t, err)
	t.Cleanup(func() { _ = logFile.Close() })
	cmd.Stdout, cmd.Stderr = logFile, logFile
	require.NoError(t, cmd.Start())
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	log := func() string { b, _ := os.ReadFile(logPath); return string(b) }
	// Asked every 200 ms: most of the wait is go run building the binary.
	poll.Every(t, 200*time.Millisecond, 3*time.Minute, "serve starts under go run",
		func() bool { return strings.Contains(log(), `"msg":"serving"`) },
		func() string { return "log:\n" + tailLines(log(), 30) })
	servePID := childOf(t, cmd.Process.Pid)
	require.NotZero(t, servePID, "go run's child")
	postmaster, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	require.NoError(t, err)
	pgPID, err := strconv.Atoi(strings.SplitN(string(postmaster), "\n", 2)[0])
	require.NoError(t, err)

	require.NoError(t, cmd.Process.Signal(syscall.SIGTERM))
	_ = cmd.Wait()
	poll.Until(t, time.Minute, fmt.Sprintf("serve (pid %d) and its PostgreSQL (pid %d) stop with go run", servePID, pgPID), func() (bool, string) {
		serve, pg := alive(servePID), alive(pgPID)
		return !serve && !pg, fmt.Sprintf("serve alive: %t, PostgreSQL alive: %t; log:\n%s", serve, pg, tailLines(log(), 30))
	})
	require.Contains(t, log(), "shutdown complete", "serve drained and stopped cleanly")
}

// childOf returns the first process whose parent is pid, or 0.
func childOf(t *testing.T, pid int) int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	for _, e := range entries {
		child, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so read after ')'.
		fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
		if len(fields) > 1 && fields[1] == strconv.Itoa(pid) {
			return child
		}
	}
	return 0
}

// alive reports whether pid runs (and is not a zombie).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
