package pgcluster

import (
	"context"

	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// testDir returns a fresh directory that the postgres account can traverse
// when the tests run as root (t.TempDir is mode 0700).
func testDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.MkdirTemp("", "pgcluster-test-")
	require.NoError(tb, err)
	require.NoError(tb, os.Chmod(dir, 0o755))
	tb.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// logRecorder collects Logf messages.
type logRecorder struct {
	tb   testing.TB
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) logf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.msgs = append(r.msgs, msg)
	r.mu.Unlock()
	r.tb.Log(msg)
}

func (r *logRecorder) contains(sub string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, m := range r.msgs {
		if strings.Contains(m, sub) {
			return true
		}
	}
	return false
}

func (r *logRecorder) reset() {
	r.mu.Lock()
	r.msgs = nil
	r.mu.Unlock()
}

func startCluster(t *testing.T, opts Options) *Cluster {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	cl, err := Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cl.Stop(context.Background()) })
	return cl
}

func queryString(t *testing.T, connString, sql string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var s string
	require.NoError(t, conn.QueryRow(ctx, sql).Scan(&s))
	return s
}

func execSQL(t *testing.T, connString, sql string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, connString)
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, sql)
	require.NoError(t, err)
}

func TestStartStopRestartReusesDataDir(t *testing.T) {
	t.Parallel()
	dir := testDir(t)
	rec := &logRecorder{tb: t}
	opts := Options{DataDir: filepath.Join(dir, "postgres"), Logf: rec.logf}

	cl := startCluster(t, opts)
	require.True(t, rec.contains("initdb"), "first start runs initdb")
	require.Equal(t, "1", queryString(t, cl.ConnString("postgres"), "select 1::text"))
	require.Equal(t, "off", queryString(t, cl.ConnString("postgres"), "show fsync"))
	execSQL(t, cl.ConnString("postgres"), "create table kept (x int); insert into kept values (42)")
	require.FileExists(t, cl.LogPath())
	require.Equal(t, filepath.Join(dir, "postgres.log"), cl.LogPath())
	require.Equal(t, filepath.Join(dir, "postgres-socket"), cl.SocketDir())
	require.FileExists(t, filepath.Join(cl.SocketDir(), fmt.Sprintf(".s.PGSQL.%d.lock", cl.Port())))
	_, err := cl.TCPConnString("postgres")
	require.Error(t, err, "socket only by default")

	require.NoError(t, cl.Stop(context.Background()))
	require.NoError(t, cl.Stop(context.Background()), "second Stop is a no-op")

	rec.reset()
	cl2 := startCluster(t, opts)
	require.False(t, rec.contains("initdb"), "restart reuses the cluster")
	require.Equal(t, "42", queryString(t, cl2.ConnString("postgres"), "select x::text from kept"))
	require.NoError(t, cl2.Stop(context.Background()))
}

func TestListenTCPAndSettings(t *testing.T) {
	t.Parallel()
	cl := startCluster(t, Options{
		DataDir:   filepath.Join(testDir(t), "data"),
		ListenTCP: true,
		Durable:   true,
		Settings:  map[string]string{"max_connections": "37", "application_name": "it's \"quoted\""},
	})
	url, err := cl.TCPConnString("postgres")
	require.NoError(t, err)
	require.Contains(t, url, "127.0.0.1:")
	require.Equal(t, "37", queryString(t, url, "show max_connections"))
	require.Equal(t, "on", queryString(t, url, "show fsync"))
	require.Equal(t, `it's "quoted"`, queryString(t, cl.ConnString("postgres"), "select setting from pg_settings where name = 'application_name'"))
}

func TestSecondStartOnSameDataDirIsInUse(t *testing.T) {
	t.Parallel()
	opts := Options{DataDir: filepath.Join(testDir(t), "data")}
	startCluster(t, opts)
	_, err := Start(context.Background(), opts)
	require.ErrorIs(t, err, ErrInUse)
	require.ErrorIs(t, StopOrphan(context.Background(), opts), ErrInUse)
}

// TestRestartAfterOwnerDied covers a server left running by a process that
// died: the next Start stops it and starts again.
func TestRestartAfterOwnerDied(t *testing.T) {
	t.Parallel()
	rec := &logRecorder{tb: t}
	opts := Options{DataDir: filepath.Join(testDir(t), "data"), Logf: rec.logf}
	cl := startCluster(t, opts)
	oldPID := postmasterPID(t, opts.DataDir)
	cl.lock.unlock() // as if the process had exited
	cl.stopped = true

	cl2 := startCluster(t, opts)
	require.True(t, rec.contains("left running by a process that exited"))
	require.NotEqual(t, oldPID, postmasterPID(t, opts.DataDir))
	require.Equal(t, "1", queryString(t, cl2.ConnString("postgres"), "select 1::text"))
}

func TestStopOrphan(t *testing.T) {
	t.Parallel()
	opts := Options{DataDir: filepath.Join(testDir(t), "data")}
	cl := startCluster(t, opts)
	pid := postmasterPID(t, opts.DataDir)
	cl.lock.unlock()
	cl.stopped = true

	require.NoError(t, StopOrphan(context.Background(), opts))
	// pg_ctl stop returns once postmaster.pid is gone, a moment before the
	// process has exited.
	poll.UntilTrue(t, 10*time.Second, "the stopped server's process exited", func() bool { return syscall.Kill(pid, 0) != nil })
	require.NoError(t, StopOrphan(context.Background(), opts), "nothing running is fine")
}

// TestRestartAfterServerKilled covers a postmaster killed with SIGKILL,
// which leaves postmaster.pid naming a dead process.
func TestRestartAfterServerKilled(t *testing.T) {
	t.Parallel()
	// Durable, because without synchronous_commit the last commit may only
	// be in the killed server's memory.
	opts := Options{DataDir: filepath.Join(testDir(t), "data"), Durable: true}
	cl := startCluster(t, opts)
	execSQL(t, cl.ConnString("postgres"), "create table t (x int); insert into t values (7)")
	pid := postmasterPID(t, opts.DataDir)
	require.NoError(t, syscall.Kill(pid, syscall.SIGKILL))
	poll.UntilTrue(t, 10*time.Second, "the killed server's process is gone", func() bool { return syscall.Kill(pid, 0) != nil })
	cl.lock.unlock()
	cl.stopped = true
	require.FileExists(t, filepath.Join(opts.DataDir, "postmaster.pid"))

	cl2 := startCluster(t, opts)
	require.Equal(t, "7", queryString(t, cl2.ConnString("postgres"), "select x::text from t"))
}

// TestStalePIDFileNamingLiveProcess covers postmaster.pid naming a PID that
// now belongs to an unrelated process of the server user, on which postgres
// alone would refuse to start.
func TestStalePIDFileNamingLiveProcess(t *testing.T) {
	t.Parallel()
	rec := &logRecorder{tb: t}
	opts := Options{DataDir: filepath.Join(testDir(t), "data"), Logf: rec.logf}
	cl := startCluster(t, opts)
	require.NoError(t, cl.Stop(context.Background()))

	su, err := lookupServerUser()
	require.NoError(t, err)
	sleeper := su.command(context.Background(), "/", "sleep", "60")
	require.NoError(t, sleeper.Start())
	t.Cleanup(func() { _ = sleeper.Process.Kill(); _ = sleeper.Wait() })
	pidFile := filepath.Join(opts.DataDir, "postmaster.pid")
	require.NoError(t, os.WriteFile(pidFile, fmt.Appendf(nil, "%d\n%s\n", sleeper.Process.Pid, opts.DataDir), 0o600))
	require.NoError(t, su.chown(pidFile))

	cl2 := startCluster(t, opts)
	require.True(t, rec.contains("removing stale"))
	require.Equal(t, "1", queryString(t, cl2.ConnString("postgres"), "select 1::text"))
}

func TestLongSocketPathFallsBackToTmp(t *testing.T) {
	t.Parallel()
	deep := testDir(t)
	for len(deep) < 120 {
		deep = filepath.Join(deep, "a-rather-long-directory-name")
	}
	require.NoError(t, os.MkdirAll(deep, 0o755))
	cl := startCluster(t, Options{DataDir: filepath.Join(deep, "data")})
	require.True(t, strings.HasPrefix(cl.SocketDir(), "/tmp/mailfathom-pg-"), cl.SocketDir())
	require.Equal(t, "1", queryString(t, cl.ConnString("postgres"), "select 1::text"))
	require.NoError(t, cl.Stop(context.Background()))
	require.NoDirExists(t, cl.SocketDir())

	_, err := Start(context.Background(), Options{DataDir: filepath.Join(deep, "data"), SocketDir: deep})
	require.ErrorContains(t, err, "too long")
}

func TestUntraversableParentIsExplained(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("only root runs the server as another user")
	}
	t.Parallel()
	private := filepath.Join(testDir(t), "private")
	require.NoError(t, os.Mkdir(private, 0o700))
	_, err := Start(context.Background(), Options{DataDir: filepath.Join(private, "pg", "data")})
	require.ErrorContains(t, err, `"postgres" cannot enter `+private)
	require.ErrorContains(t, err, "choose a directory")
}

func TestNonEmptyNonClusterDirIsRefused(t *testing.T) {
	t.Parallel()
	dataDir := filepath.Join(testDir(t), "data")
	require.NoError(t, os.Mkdir(dataDir, 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dataDir, "precious.txt"), []byte("x"), 0o644))
	_, err := Start(context.Background(), Options{DataDir: dataDir})
	require.ErrorContains(t, err, "holds no PostgreSQL cluster")
	require.FileExists(t, filepath.Join(dataDir, "precious.txt"))
}

func TestOptionsValidation(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for name, opts := range map[string]Options{
		"no data dir":     {},
		"managed setting": {DataDir: "/tmp/x", Settings: map[string]string{"Port": "5"}},
		"bad name":        {DataDir: "/tmp/x", Settings: map[string]string{"a b": "5"}},
		"bad port":        {DataDir: "/tmp/x", Port: 70000},
		"comma":           {DataDir: "/tmp/x", SocketDir: "/tmp/a,b"},
	} {
		_, err := opts.resolve(ctx)
		require.Error(t, err, name)
	}
	c, err := Options{DataDir: "rel"}.resolve(ctx)
	require.NoError(t, err)
	require.True(t, filepath.IsAbs(c.DataDir))
	require.Equal(t, c.DataDir+"-socket", c.SocketDir)
	require.Equal(t, 2*time.Minute, c.StartTimeout)
	require.NotEmpty(t, c.BinDir)
}

func TestStartFailureQuotesServerLog(t *testing.T) {
	t.Parallel()
	_, err := Start(context.Background(), Options{
		DataDir:  filepath.Join(testDir(t), "data"),
		Settings: map[string]string{"shared_buffers": "not-a-size"},
	})
	require.Error(t, err)
	require.ErrorContains(t, err, "shared_buffers")
	require.ErrorContains(t, err, "server log")
}

func postmasterPID(t *testing.T, dataDir string) int {
	t.Helper()
	pid, err := livePostmaster(dataDir, t.Logf)
	require.NoError(t, err)
	require.NotZero(t, pid)
	return pid
}

// BenchmarkStartFresh measures initdb plus start plus stop.
func BenchmarkStartFresh(b *testing.B) {
	dir := testDir(b)
	ctx := context.Background()
	for i := 0; b.Loop(); i++ {
		cl, err := Start(ctx, Options{DataDir: filepath.Join(dir, fmt.Sprint(i))})
		if err != nil {
			b.Fatal(err)
		}
		if err := cl.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkRestart measures start plus stop of an existing cluster.
func BenchmarkRestart(b *testing.B) {
	ctx := context.Background()
	opts := Options{DataDir: filepath.Join(testDir(b), "data")}
	if err := Init(ctx, opts); err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		cl, err := Start(ctx, opts)
		if err != nil {
			b.Fatal(err)
		}
		if err := cl.Stop(ctx); err != nil {
			b.Fatal(err)
		}
	}
}
