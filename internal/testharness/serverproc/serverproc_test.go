package serverproc_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/serverproc"
)

func ready(context.Context) error { return nil }

// TestStopEndsTheWholeProcessGroup: a child the master started, which
// ignores SIGTERM, is gone after Stop, as Dovecot's and Cyrus's children
// must be.
func TestStopEndsTheWholeProcessGroup(t *testing.T) {
	t.Parallel()
	pidFile := filepath.Join(t.TempDir(), "child.pid")
	cmd := exec.Command("sh", "-c", `sh -c 'trap "" TERM; echo $$ > "$0.tmp"; mv "$0.tmp" "$0"; exec sleep 60' "$0" & wait`, pidFile)
	p, err := serverproc.Start(cmd, 50*time.Millisecond, func(context.Context) error {
		_, err := os.Stat(pidFile)
		return err
	})
	require.NoError(t, err)
	require.Equal(t, -1, p.ExitCode(), "running")
	text, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	child := strings.TrimSpace(string(text))
	require.True(t, alive(child), "child %s", child)

	p.Stop()
	poll.UntilTrue(t, 5*time.Second, "the child that ignores SIGTERM does not outlive Stop", func() bool { return !alive(child) })
	p.Stop() // idempotent
}

// alive reports whether process pid exists and is not a zombie.
func alive(pid string) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", pid, "stat"))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

// TestStartReportsAnExitDuringStartUp: a server that exits before it is
// ready fails the start with ErrExited and its exit status, which a
// harness reads to tell a port taken (Cyrus's master exits 69).
func TestStartReportsAnExitDuringStartUp(t *testing.T) {
	t.Parallel()
	p, err := serverproc.Start(exec.Command("sh", "-c", "exit 69"), time.Second, func(context.Context) error {
		return errors.New("not yet")
	})
	require.ErrorIs(t, err, serverproc.ErrExited)
	require.ErrorContains(t, err, "exit status 69")
	require.Equal(t, 69, p.ExitCode())
}

// greeter serves one line per connection on a loopback port.
func greeter(t *testing.T, lines ...string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			_, _ = conn.Write([]byte(strings.Join(lines, "\r\n") + "\r\n"))
			conn.Close()
		}
	}()
	return ln.Addr().String()
}

func TestProbeTellsItsServerFromAnother(t *testing.T) {
	t.Parallel()
	own := func(line string) bool { return strings.HasSuffix(line, "] ours ready.") }
	// Dovecot greets once more when its auth process is up.
	addr := greeter(t, "* OK Waiting for authentication process to respond..", "* OK [CAPABILITY IMAP4rev1] ours ready.")
	require.NoError(t, serverproc.Probe(t.Context(), addr, own))

	addr = greeter(t, "* OK [CAPABILITY IMAP4rev1] theirs ready.")
	require.ErrorIs(t, serverproc.Probe(t.Context(), addr, own), serverproc.ErrAnotherServer)
	addr = greeter(t, "220 smtp.example.org ESMTP")
	require.ErrorIs(t, serverproc.Probe(t.Context(), addr, own), serverproc.ErrAnotherServer)
}

// TestSupervisorRetriesOnlyATakenPort: a launch whose port was taken is
// tried again, up to PortAttempts times on a first start and not on a
// restart; any other failure ends the start.
func TestSupervisorRetriesOnlyATakenPort(t *testing.T) {
	t.Parallel()
	var sup serverproc.Supervisor
	t.Cleanup(sup.Stop)
	taken := errors.New("address already in use")
	launches := 0
	launch := func() (*serverproc.Process, error) {
		launches++
		if launches < 3 {
			return nil, serverproc.PortTaken(taken)
		}
		return serverproc.Start(exec.Command("sleep", "60"), time.Second, ready)
	}
	require.NoError(t, sup.Start(true, launch))
	require.Equal(t, 3, launches)
	run, running := sup.Run()
	require.Equal(t, uint64(1), run)
	require.True(t, running)

	sup.Stop()
	_, running = sup.Run()
	require.False(t, running)
	alwaysTaken := func() (*serverproc.Process, error) { launches++; return nil, serverproc.PortTaken(taken) }
	launches = 0
	err := sup.Start(true, alwaysTaken)
	require.ErrorIs(t, err, taken)
	require.Equal(t, serverproc.PortAttempts, launches)
	launches = 0
	err = sup.Start(false, alwaysTaken)
	require.ErrorContains(t, err, "could not bind free ports in 1 attempts: address already in use")
	require.Equal(t, 1, launches, "a restart keeps its ports")
	other := errors.New("bad configuration")
	launches = 0
	err = sup.Start(true, func() (*serverproc.Process, error) { launches++; return nil, other })
	require.Equal(t, other, err)
	require.Equal(t, 1, launches)

	require.NoError(t, sup.Start(false, func() (*serverproc.Process, error) {
		return serverproc.Start(exec.Command("sleep", "60"), time.Second, ready)
	}))
	run, running = sup.Run()
	require.Equal(t, uint64(2), run, "a restart is a new run")
	require.True(t, running)
}

func TestSharedStartsOnceAndAgainAfterStop(t *testing.T) {
	t.Parallel()
	var shared serverproc.Shared[int]
	starts := 0
	start := func() (int, error) { starts++; return starts, nil }
	for range 2 {
		n, err := shared.Get(start)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	}
	var stopped []int
	shared.Stop(func(n int) { stopped = append(stopped, n) })
	require.Equal(t, []int{1}, stopped)

	failed := errors.New("no server")
	_, err := shared.Get(func() (int, error) { return 0, failed })
	require.ErrorIs(t, err, failed)
	_, err = shared.Get(start)
	require.ErrorIs(t, err, failed, "a failed start is not retried")
	shared.Stop(func(n int) { stopped = append(stopped, n) })
	require.Equal(t, []int{1}, stopped, "nothing to stop after a failed start")
	n, err := shared.Get(start)
	require.NoError(t, err)
	require.Equal(t, 2, n)
}

// fatalRecorder records the message of a Fatalf instead of ending the
// test, for checks of what fails a test.
type fatalRecorder struct {
	testing.TB
	msg string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) { r.msg = fmt.Sprintf(format, args...) }

// TestInstanceSharedOrOwned: an instance from UseShared is started once
// and refuses what would disturb the tests that share it; one a test
// owns may be stopped, and is closed, its directory removed, when that
// test ends.
func TestInstanceSharedOrOwned(t *testing.T) {
	t.Parallel()
	type server struct{ serverproc.Instance }
	var shared serverproc.Shared[*server]
	starts := 0
	start := func() (*server, error) {
		starts++
		return &server{serverproc.Instance{Name: "test"}}, nil
	}
	in := serverproc.UseShared(t, &shared, "test", start)
	require.Same(t, in, serverproc.UseShared(t, &shared, "test", start))
	require.Equal(t, 1, starts)
	r := &fatalRecorder{TB: t}
	in.MustOwn(r, "Stop")
	require.Equal(t, "test: Stop on the shared server would disturb other tests; use Start", r.msg)

	dir := filepath.Join(t.TempDir(), "instance")
	require.NoError(t, os.Mkdir(dir, 0o755))
	owned := &server{serverproc.Instance{Name: "test", Dir: dir}}
	t.Run("owner", func(t *testing.T) {
		owned.CloseAfter(t)
		r := &fatalRecorder{TB: t}
		owned.MustOwn(r, "Stop")
		require.Empty(t, r.msg)
	})
	require.NoDirExists(t, dir)
}
