package pgtest

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/sysdeps"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

func TestIdentifier(t *testing.T) {
	t.Parallel()
	require.Equal(t, "t_testfoo_sub_case_7", identifier("t_TestFoo/sub case", "_7"))
	require.Equal(t, "t_a_b_1", identifier("t_a//--b__", "_1"))
	long := identifier("t_"+strings.Repeat("Long/Name-", 20), "_123456")
	require.Len(t, long, maxIdentifier)
	require.True(t, strings.HasSuffix(long, "_123456"))
	a, b := databaseName("TestX"), databaseName("TestX")
	require.NotEqual(t, a, b)
}

func TestFailingTemplateBuildIsReportedAndCleanedUp(t *testing.T) {
	t.Parallel()
	s := get(t)
	_, err := s.buildTemplate("broken", func(context.Context, string) error { return errors.New("migration 3 failed") })
	require.ErrorContains(t, err, "migration 3 failed")
	var exists bool
	require.NoError(t, s.admin.QueryRow(t.Context(), "select exists (select from pg_database where datname like 'tmpl_broken_%')").Scan(&exists))
	require.False(t, exists)
}

// TestOrphanedClusterIsReaped kills a test binary (this one, re-executed)
// that started a cluster, and checks the next reap stops it and removes its
// directory.
func TestOrphanedClusterIsReaped(t *testing.T) {
	if os.Getenv("PGTEST_ORPHAN_HELPER") == "1" {
		runOrphanHelper(t)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestOrphanedClusterIsReaped$")
	cmd.Env = append(os.Environ(), "PGTEST_ORPHAN_HELPER=1")
	cmd.Stderr = os.Stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(stdout).ReadString('\n')
	require.NoError(t, err, "helper output")
	fields := strings.Fields(line)
	require.Len(t, fields, 3, line)
	require.Equal(t, "orphan", fields[0])
	runPath := fields[1]
	pid, err := strconv.Atoi(fields[2])
	require.NoError(t, err)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.NoError(t, syscall.Kill(pid, 0), "the killed binary's server outlives it")

	paths, err := sysdeps.Ensure(t.Context(), t.Logf, sysdeps.PostgreSQL)
	require.NoError(t, err)
	root := filepath.Dir(runPath)
	lock, err := lockWait(t.Context(), filepath.Join(root, "lock"))
	require.NoError(t, err)
	reapOrphans(t.Context(), root, filepath.Dir(paths[0]), t.Logf)
	lock.Close()

	require.NoDirExists(t, runPath)
	poll.UntilTrue(t, 10*time.Second, "the orphaned server's process exited", func() bool { return syscall.Kill(pid, 0) != nil })
}

// runOrphanHelper starts a cluster, reports it, and waits to be killed.
func runOrphanHelper(t *testing.T) {
	s := get(t)
	b, err := os.ReadFile(filepath.Join(s.run.dataDir(), "postmaster.pid"))
	require.NoError(t, err)
	pid, _, _ := strings.Cut(string(b), "\n")
	os.Stdout.WriteString("orphan " + s.run.path + " " + pid + "\n")
	time.Sleep(time.Minute)
	t.Fatal("not killed")
}

// BenchmarkClusterStart measures what a test binary pays for its cluster
// once the seed exists: claim a run directory (with a reap scan), copy the
// seed, pg_ctl start; then stop and remove it.
func BenchmarkClusterStart(b *testing.B) {
	ctx := context.Background()
	paths, err := sysdeps.Ensure(ctx, b.Logf, sysdeps.PostgreSQL)
	if err != nil {
		b.Fatal(err)
	}
	binDir := filepath.Dir(paths[0])
	root, err := workRoot()
	if err != nil {
		b.Fatal(err)
	}
	var startTotal time.Duration
	for b.Loop() {
		begin := time.Now()
		run, seed, err := claimRunDir(ctx, root, binDir, b.Logf)
		if err != nil {
			b.Fatal(err)
		}
		cl, err := startCluster(ctx, run, seed, binDir, nil)
		if err != nil {
			b.Fatal(err)
		}
		startTotal += time.Since(begin)
		s := &server{run: run, cluster: cl}
		if err := s.close(ctx); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(startTotal.Milliseconds())/float64(b.N), "start-ms/op")
}

// TestStartFailureFailsTheTest runs a test in a child binary whose cluster
// cannot start and checks that the test fails, with the reason, rather than
// being skipped.
func TestStartFailureFailsTheTest(t *testing.T) {
	if os.Getenv("PGTEST_FAILURE_HELPER") == "1" {
		Database(t)
		return
	}
	t.Parallel()
	cmd := exec.Command(os.Args[0], "-test.run=^TestStartFailureFailsTheTest$", "-test.v")
	cmd.Env = append(os.Environ(), "PGTEST_FAILURE_HELPER=1", rootEnv+"=/dev/null/not-a-dir")
	out, err := cmd.CombinedOutput()
	require.Error(t, err, "the child's test must fail:\n%s", out)
	require.Contains(t, string(out), "--- FAIL: TestStartFailureFailsTheTest")
	require.Contains(t, string(out), "pgtest: start PostgreSQL: pgtest: mkdir /dev/null/not-a-dir")
}
