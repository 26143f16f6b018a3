package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/httpserver"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/push"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/schema"
	"github.com/mailfathom/mailfathom/workers"
)

// HTTPShutdownBound is how long in-flight HTTP requests get at shutdown,
// once River has stopped.
const HTTPShutdownBound = 5 * time.Second

// ShutdownBound is how long Run's shutdown may take with a drain of drain
// against a configured database: the drain, the hard stop of the jobs still
// running after it (jobqueue.HardStopBound), and the HTTP server's
// shutdown. Whatever stops the process (a container's stop grace period,
// Kubernetes' terminationGracePeriodSeconds, systemd's TimeoutStopSec) must
// wait longer than this, or it kills the process in the middle of the
// drain. The embedded cluster's stop, when there is one, comes on top.
func ShutdownBound(drain time.Duration) time.Duration {
	return drain + jobqueue.HardStopBound + HTTPShutdownBound
}

// Run serves until ctx ends, then shuts down: River stops fetching and
// drains first, then the HTTP server, then the pool, then the embedded
// cluster. It returns the first error that stopped the start, or the
// errors of an unclean shutdown.
func Run(ctx context.Context, opts Options) (err error) {
	r := &running{opts: opts, logger: opts.Logger, drain: opts.ShutdownDrain}
	defer func() { err = errors.Join(err, r.shutdown(context.WithoutCancel(ctx))) }()
	defer func() {
		if r.http == nil && r.ln != nil {
			_ = r.ln.Close()
		}
	}()
	defer func() {
		if r.cancelHousekeeping != nil {
			r.cancelHousekeeping()
		}
	}()
	for _, step := range []func(context.Context) error{
		r.listen,
		r.openDatabase,
		r.registerMetrics,
		r.takeProcessLock,
		r.buildWorkers,
		r.startRiver,
		r.sweepOrphans,
		r.registerCollectors,
		r.scheduleWork,
		r.mountRoutes,
		r.serve,
	} {
		if err := step(ctx); err != nil {
			return err
		}
	}
	select {
	case <-ctx.Done():
		r.logger.InfoContext(ctx, "shutting down", slog.Duration("bound", ShutdownBound(r.drain)))
		return nil
	case err := <-r.serveErr:
		return fmt.Errorf("http server: %w", err)
	}
}

// DatabaseStartPatience is how long Run waits, at start, for a database
// that refuses or drops connections: one being restarted or promoted, or
// started beside MailFathom, answers within it, and only a database still
// unreachable after it stops the start.
const DatabaseStartPatience = 15 * time.Second

// pingDatabase waits until the database answers a ping, asking again every
// half second for DatabaseStartPatience. It does not tell a wrong address
// from a database that is late: both are waited for, then reported.
func pingDatabase(ctx context.Context, pool *pgxpool.Pool, logger *slog.Logger) error {
	ctx, cancel := context.WithTimeout(ctx, DatabaseStartPatience)
	defer cancel()
	for waited := false; ; waited = true {
		err := pool.Ping(ctx)
		if err == nil {
			if waited {
				logger.InfoContext(ctx, "the database answers now")
			}
			return nil
		}
		if !waited {
			logger.WarnContext(ctx, "the database does not answer yet; waiting for it",
				slog.Duration("patience", DatabaseStartPatience), slog.String("error_type", fmt.Sprintf("%T", err)))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("database unreachable for %v: %w", DatabaseStartPatience, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

func migrateOrCheck(ctx context.Context, pool *pgxpool.Pool, migrate bool, logger *slog.Logger) error {
	if migrate {
		v, err := schema.Migrate(ctx, pool, logger)
		if err != nil {
			return err
		}
		logger.InfoContext(ctx, "database schema is current", slog.String("versions", v.String()))
		return nil
	}
	v, err := schema.Status(ctx, pool)
	if err != nil {
		return err
	}
	if !v.Current() {
		return fmt.Errorf("the database schema is not current (%s) and MAILFATHOM_MIGRATE_ON_START is false: run `mailfathom migrate` first", v)
	}
	return nil
}

// readiness is the /readyz check: the database answers and both schemas are
// at the versions this binary expects.
func readiness(pool *pgxpool.Pool) httpserver.ReadinessCheck {
	return func(ctx context.Context) error {
		v, err := schema.Status(ctx, pool)
		if err != nil {
			return errors.New("database unreachable")
		}
		if !v.Current() {
			return fmt.Errorf("migrations not current (%s)", v)
		}
		return nil
	}
}

// running holds what Run's steps started, so later steps can use it and
// shutdown can stop it in order.
type running struct {
	opts   Options
	logger *slog.Logger
	drain  time.Duration

	ln       net.Listener
	embedded *pgcluster.Embedded
	cfg      *config.Config
	pool     *pgxpool.Pool
	reg      *prometheus.Registry

	jobMetrics  *jobqueue.Metrics
	pushMetrics *push.Metrics
	clientID    string
	processLock *liveness.ProcessLock

	ws        *river.Workers
	deps      workers.Dependencies
	failures  rivertype.WorkerMiddleware
	pipelines *resilience.Registry

	river       *river.Client[pgx.Tx]
	cancelRiver context.CancelFunc
	// cancelHousekeeping ends the second startup sweep and the
	// maintenance loop when Run returns.
	cancelHousekeeping context.CancelFunc
	housekeeping       context.Context
	statusOpts         status.Options

	routes   httpserver.Routes
	uiLine   string
	cancelUI context.CancelFunc
	http     *http.Server
	serveErr chan error
	// stopping is closed when shutdown begins, so work under way ends at
	// its next boundary (a folder pass after its batch in flight).
	stopping chan struct{}
}

// processLockCheck is how often the process liveness lock's connection is
// checked, and how soon after a database outage the lock is held again.
const processLockCheck = 2 * time.Second

// shutdown stops what was started, in the order that keeps committed work
// durable and the probes answering while jobs drain: River first (stop
// fetching, drain, cancel), then the HTTP server, River UI's background
// services, the pool (River must be stopped before it, or closing it
// hangs), and the embedded cluster last.
func (r *running) shutdown(ctx context.Context) error {
	start := time.Now()
	var errs []error
	if r.stopping != nil {
		close(r.stopping)
	}
	if r.river != nil {
		r.logger.InfoContext(ctx, "stopping River: no new jobs are fetched; running jobs get the drain period",
			slog.Duration("drain", r.drain))
		err := jobqueue.Drain(ctx, r.river, r.drain)
		errs = append(errs, err)
		r.cancelRiver()
		r.logger.InfoContext(ctx, "River stopped", slog.Duration("took", time.Since(start)), slog.Bool("clean", err == nil))
	}
	if r.http != nil {
		httpCtx, cancel := context.WithTimeout(ctx, HTTPShutdownBound)
		errs = append(errs, r.http.Shutdown(httpCtx))
		cancel()
	}
	if r.cancelUI != nil {
		r.cancelUI()
	}
	if r.processLock != nil {
		r.processLock.Close()
	}
	if r.pool != nil {
		r.pool.Close()
	}
	if r.embedded != nil {
		r.logger.InfoContext(ctx, "stopping the embedded PostgreSQL cluster")
		errs = append(errs, r.embedded.Stop(ctx))
	}
	err := errors.Join(errs...)
	if r.pool != nil || r.embedded != nil {
		r.logger.InfoContext(ctx, "shutdown complete", slog.Duration("took", time.Since(start)), slog.Bool("clean", err == nil))
	}
	return err
}

// processID names this process as a River client: host, pid and a random
// suffix, unique across restarts, since liveness is keyed by it.
func processID() string {
	host, _ := os.Hostname()
	var b [4]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%x", cmp.Or(host, "mailfathom"), os.Getpid(), b)
}
