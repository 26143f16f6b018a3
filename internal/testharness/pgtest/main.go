package pgtest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/sysdeps"
)

// startTimeout bounds starting the cluster, including installing PostgreSQL.
const startTimeout = 5 * time.Minute

var (
	mainCalled atomic.Bool

	startOnce sync.Once
	shared    *server
	startErr  error

	// logs forwards pgcluster's messages to the test that started the
	// cluster while it starts, and to stderr with -v afterwards.
	logs switchLog
)

// server is this binary's cluster.
type server struct {
	run     *runDir
	cluster *pgcluster.Cluster
	admin   *pgxpool.Pool // connected to the "postgres" database
	took    time.Duration // how long start took
}

// Main runs the tests, stops the cluster if a test started one, and exits
// with the tests' result, or 1 if the cluster could not be stopped. Call it
// from the package's TestMain; Database, Pool and TemplateDatabase fail
// tests of a binary whose TestMain does not, since its cluster would outlive
// the binary.
func Main(m *testing.M) {
	mainCalled.Store(true)
	code := m.Run()
	if err := shutdown(); err != nil {
		fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		if code == 0 {
			code = 1
		}
	}
	os.Exit(code)
}

// get returns the binary's cluster, starting it on first use, or fails t.
func get(t testing.TB) *server {
	t.Helper()
	if !mainCalled.Load() {
		t.Fatal("pgtest: the package's TestMain must call pgtest.Main(m), which stops the cluster after the tests")
	}
	startOnce.Do(func() {
		logs.set(t.Logf)
		defer logs.set(nil)
		ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
		defer cancel()
		shared, startErr = start(ctx, logs.logf)
		if startErr == nil {
			t.Logf("pgtest: PostgreSQL ready in %v at %s", shared.took.Round(time.Millisecond), shared.run.path)
		}
	})
	if startErr != nil {
		t.Fatalf("pgtest: start PostgreSQL: %v", startErr)
	}
	return shared
}

// start claims a run directory, copies the seed into it and starts the
// cluster there.
func start(ctx context.Context, logf func(string, ...any)) (_ *server, err error) {
	begin := time.Now()
	paths, err := sysdeps.Ensure(ctx, logf, sysdeps.PostgreSQL)
	if err != nil {
		return nil, err
	}
	binDir := filepath.Dir(paths[0])
	root, err := workRoot()
	if err != nil {
		return nil, err
	}
	run, seed, err := claimRunDir(ctx, root, binDir, logf)
	if err != nil {
		return nil, err
	}
	s := &server{run: run}
	defer func() {
		if err != nil {
			s.close(context.WithoutCancel(ctx))
		}
	}()
	if s.cluster, err = startCluster(ctx, run, seed, binDir, logf); err != nil {
		return nil, err
	}
	cfg, err := pgxpool.ParseConfig(s.cluster.ConnString("postgres"))
	if err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	cfg.MaxConns = 4
	if s.admin, err = pgxpool.NewWithConfig(ctx, cfg); err != nil {
		return nil, fmt.Errorf("pgtest: %w", err)
	}
	s.took = time.Since(begin)
	return s, nil
}

// startCluster copies the seed into run and starts a non-durable cluster on
// it, listening on its unix socket only.
func startCluster(ctx context.Context, run *runDir, seed, binDir string, logf func(string, ...any)) (*pgcluster.Cluster, error) {
	if err := copyDataDir(ctx, seed, run.dataDir()); err != nil {
		return nil, err
	}
	return pgcluster.Start(ctx, pgcluster.Options{
		DataDir: run.dataDir(),
		BinDir:  binDir,
		Logf:    logf,
	})
}

// shutdown stops the cluster, if one was started, and removes its run
// directory. When the cluster does not stop, the directory stays for a
// later binary to reap.
func shutdown() error {
	if shared == nil {
		return nil
	}
	if testing.Verbose() {
		logs.set(func(format string, args ...any) { fmt.Fprintf(os.Stderr, format+"\n", args...) })
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	return shared.close(ctx)
}

func (s *server) close(ctx context.Context) error {
	if s.admin != nil {
		s.admin.Close()
	}
	if s.cluster != nil {
		if err := s.cluster.Stop(ctx); err != nil {
			s.run.owner.Close()
			return err
		}
	}
	return s.run.remove()
}

// switchLog is a Logf whose destination can change, since the cluster keeps
// the function it was started with and a test's Logf must not be called
// after the test ends.
type switchLog struct {
	mu sync.Mutex
	f  func(string, ...any)
}

func (l *switchLog) set(f func(string, ...any)) {
	l.mu.Lock()
	l.f = f
	l.mu.Unlock()
}

func (l *switchLog) logf(format string, args ...any) {
	l.mu.Lock()
	f := l.f
	l.mu.Unlock()
	if f != nil {
		f(format, args...)
	}
}
