package service

import (
	"cmp"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/httpserver"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/mailoauth"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/push"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/riverui"
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
	logger := opts.Logger
	console := cmp.Or[io.Writer](opts.Console, io.Discard)
	var r running
	r.logger = logger
	r.drain = opts.ShutdownDrain
	defer func() { err = errors.Join(err, r.shutdown(context.WithoutCancel(ctx))) }()

	// The listener is bound before anything else starts: a taken address
	// fails at once, before a database is started or migrated.
	ln, err := net.Listen("tcp", opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("MAILFATHOM_HTTP_ADDR (%s) cannot be listened on; another process may hold it: %w", opts.HTTPAddr, err)
	}
	defer func() {
		if r.http == nil {
			_ = ln.Close()
		}
	}()

	connString := opts.DatabaseConnString
	embedded := connString == ""
	if embedded {
		db, err := pgcluster.StartEmbedded(ctx, opts.EmbeddedDataDir, logger)
		if err != nil {
			return err
		}
		r.embedded = db
		connString = db.ConnString
	}

	cfg := opts.Config
	if cfg == nil {
		if cfg, err = config.Load(nil); err != nil {
			return err
		}
	}
	// Account and folder jobs each hold one connection for their whole
	// run (their concurrency slots are advisory locks on it), a folder pass
	// writes through a second, and River and the liveness lock need a few of
	// their own: the pool is never smaller than that.
	maxConns := max(opts.DatabaseMaxConns, int32(opts.QueueWorkers[jobs.QueueAccounts]+2*opts.QueueWorkers[jobs.QueueFolders]+5))
	pool, err := database.Open(ctx, database.Options{
		ConnString: connString,
		Password:   opts.DatabasePassword,
		MaxConns:   maxConns,
	})
	if err != nil {
		return err
	}
	r.pool = pool
	if err := pingDatabase(ctx, pool); err != nil {
		return err
	}

	if err := migrateOrCheck(ctx, pool, opts.MigrateOnStart, logger); err != nil {
		return err
	}
	if err := searchindex.CheckConfiguration(ctx, pool, cfg.Persistence.TextSearchConfiguration); err != nil {
		return err
	}

	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	jobMetrics, err := jobqueue.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	pushMetrics, err := push.NewMetrics(reg)
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}

	// The process's liveness lock is taken before River starts, so every
	// job this process fetches is covered from its first moment; it is held
	// on a connection of its own for the process's whole life.
	clientID := processID()
	lock, err := liveness.TakeProcessLock(ctx, pool, clientID, logger)
	if err != nil {
		return fmt.Errorf("take the process liveness lock: %w", err)
	}
	r.processLock = lock
	lock.Keep(processLockCheck)

	ws := river.NewWorkers()
	pipelines, err := outbound.NewRegistry(cfg.Resilience, logger, reg)
	if err != nil {
		return fmt.Errorf("resilience: %w", err)
	}
	resolver := cmp.Or(opts.Resolver, &secret.Resolver{})
	tokens, err := mailoauth.NewSource(mailoauth.Options{Resolver: resolver, Registry: pipelines, Logger: logger})
	if err != nil {
		return fmt.Errorf("mailbox OAuth: %w", err)
	}
	r.stopping = make(chan struct{})
	deps := workers.Dependencies{Pool: pool, Config: cfg, Resolver: resolver, Logger: logger, Resilience: pipelines, Tokens: tokens, Stopping: r.stopping, Push: pushMetrics,
		VectorIndex: searchindex.NewVectorIndex()}
	if cfg.Embedding.Configured() {
		if deps.EmbeddingMetrics, err = embedding.NewMetrics(reg); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		if err := reg.Register(embedding.NewCollector(pool)); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		if deps.Embedder, err = embedding.NewClient(embedding.Options{
			URL:      cfg.Embedding.ProviderURL,
			Profile:  embedding.Profile{Model: cfg.Embedding.Model, Dimensions: cfg.Embedding.Dimensions},
			APIKey:   cfg.Embedding.APIKey,
			Resolver: resolver,
			Registry: pipelines,
			Metrics:  deps.EmbeddingMetrics,
		}); err != nil {
			return err
		}
	}
	failures, err := workers.Register(ws, deps)
	if err != nil {
		return err
	}
	client, err := jobqueue.NewClient(jobqueue.Config{
		Pool:         pool,
		Workers:      ws,
		QueueWorkers: opts.QueueWorkers,
		Logger:       logger,
		Metrics:      jobMetrics,
		Middleware:   []rivertype.WorkerMiddleware{failures},
		ID:           clientID,
	})
	if err != nil {
		return err
	}
	// River runs on its own context: shutdown is Drain's job, and a
	// cancelled Start context would begin a stop of River's own choosing.
	riverCtx, cancelRiver := context.WithCancel(context.WithoutCancel(ctx))
	if err := client.Start(riverCtx); err != nil {
		cancelRiver()
		return fmt.Errorf("start river: %w", err)
	}
	r.river, r.cancelRiver = client, cancelRiver
	if err := workers.SweepOrphans(ctx, deps, logger); err != nil {
		return err
	}
	// A job its predecessor fetched moments before dying is inside the
	// sweep's grace for clock skew; sweep once more when that has passed,
	// rather than leave it to the leader's periodic sweep, which a restarted
	// process only runs once the dead leader's lease has expired.
	sweepCtx, cancelSweep := context.WithCancel(ctx)
	defer cancelSweep()
	go func() {
		select {
		case <-sweepCtx.Done():
		case <-time.After(workers.OrphanGrace + 500*time.Millisecond):
			if err := workers.SweepOrphans(sweepCtx, deps, logger); err != nil && sweepCtx.Err() == nil {
				logger.WarnContext(ctx, "the second startup sweep failed", slog.String("error_type", failure.Name(err)))
			}
		}
	}()
	repaired := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mailfathom_account_runs_repaired_total",
		Help: "Account runs the maintenance leader scheduled because a configured account had none coming (cancelled, deleted or discarded).",
	})
	if err := reg.Register(repaired); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	statusOpts := workers.StatusOptions(deps)
	if err := reg.Register(status.NewCollector(pool, statusOpts)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := reg.Register(mutation.NewCollector(pool, cfg)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	n, err := workers.ScheduleConfiguredAccounts(ctx, deps, client)
	if err != nil {
		return fmt.Errorf("schedule account runs: %w", err)
	}
	// Housekeeping starts once every account has its run: started while
	// the accounts were still being scheduled (half a minute for a
	// thousand), its repair found the rest without one and warned about
	// each.
	go workers.Maintain(sweepCtx, deps, client, lock.Leading, repaired, logger)
	logger.InfoContext(ctx, "synchronization scheduled", slog.Bool("enabled", cfg.Sync.Enabled),
		slog.Int("accounts", len(cfg.Accounts)), slog.Int("runs_started", n))
	if _, err := workers.ScheduleExtractionBackfill(ctx, deps, client); err != nil {
		return err
	}
	if _, err := workers.ScheduleEmbeddingBackfill(ctx, deps, client); err != nil {
		return err
	}
	if _, err := workers.ScheduleVectorIndex(ctx, deps, client); err != nil {
		return err
	}

	routes := httpserver.Routes{
		Ready:    readiness(pool),
		Gatherer: reg,
	}
	var uiLine string
	if opts.UIEnabled {
		password := opts.UIPassword
		if password == nil {
			if !embedded {
				//lint:ignore ST1005 "River UI" is the job queue's dashboard, a proper name, so its capital stays.
				return errors.New("River UI needs a password when a database is configured")
			}
			var note string
			password, note, err = embeddedUIPassword(opts.EmbeddedDataDir)
			if err != nil {
				return err
			}
			uiLine = note
		}
		ui, err := riverui.New(client, riverui.Credentials{Username: opts.UIUsername, Password: password}, logger)
		if err != nil {
			return err
		}
		uiCtx, cancelUI := context.WithCancel(context.WithoutCancel(ctx))
		if err := ui.Start(uiCtx); err != nil {
			cancelUI()
			return err
		}
		r.cancelUI = cancelUI
		statusHandler := status.NewHandler(pool, statusOpts, logger)
		var accounts []string
		for _, a := range cfg.Accounts {
			accounts = append(accounts, config.AccountKey(a.ID))
		}
		searcher := &mailsearch.Searcher{
			Querier: pool, Registry: pipelines, Configuration: cfg.Persistence.TextSearchConfiguration,
			Accounts: accounts, Embedder: deps.Embedder, Index: deps.VectorIndex,
		}
		searchHandler := mailsearch.NewHandler(searcher, logger)
		mutations := mutation.NewHandler(pool, cfg, client, logger)
		mcpHandler, err := newMCPHandler(pool, cfg, searcher, client, statusOpts, reg, logger)
		if err != nil {
			return err
		}
		routes.Mount = func(mux *http.ServeMux) {
			ui.Mount(mux)
			statusHandler.Mount(mux, ui.Protect)
			searchHandler.Mount(mux, ui.Protect)
			mutations.Mount(mux, ui.Protect)
			mux.Handle(mcpPath, ui.Protect(mcpHandler))
		}
	}

	srv := &http.Server{
		Handler:           httpserver.NewMux(routes),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- srv.Serve(ln) }()
	r.http = srv

	addr := ln.Addr().String()
	logger.InfoContext(ctx, "serving", slog.String("addr", addr),
		slog.Bool("river_ui", opts.UIEnabled), slog.Bool("embedded_database", embedded))
	if opts.UIEnabled {
		fmt.Fprintf(console, "River UI: http://%s%s/ (user %q)\n", addr, riverui.Prefix, opts.UIUsername)
		fmt.Fprintf(console, "MCP: http://%s%s (the same user)\n", addr, mcpPath)
		if uiLine != "" {
			fmt.Fprintln(console, uiLine)
		}
	}
	fmt.Fprintf(console, "Health: http://%s/healthz  Readiness: http://%s/readyz  Metrics: http://%s/metrics\n", addr, addr, addr)
	if opts.AccountCount == 0 {
		logger.InfoContext(ctx, "no mailbox account is configured, so nothing is synchronized; add one with MAILFATHOM_ACCOUNTS_0_ID, MAILFATHOM_ACCOUNTS_0_HOST, MAILFATHOM_ACCOUNTS_0_USERNAME and MAILFATHOM_ACCOUNTS_0_PASSWORD (a secret reference such as file:/run/secrets/imap) and set MAILFATHOM_SYNC_ENABLED=true; the README lists every variable")
	}
	if opts.Listening != nil {
		opts.Listening(addr)
	}

	select {
	case <-ctx.Done():
		logger.InfoContext(ctx, "shutting down", slog.Duration("bound", ShutdownBound(r.drain)))
		return nil
	case err := <-serveErr:
		return fmt.Errorf("http server: %w", err)
	}
}

func pingDatabase(ctx context.Context, pool *pgxpool.Pool) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	if err := pool.Ping(ctx); err != nil {
		return fmt.Errorf("database unreachable: %w", err)
	}
	return nil
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

// running holds what Run started, so shutdown can stop it in order.
type running struct {
	logger      *slog.Logger
	drain       time.Duration
	embedded    *pgcluster.Embedded
	pool        *pgxpool.Pool
	river       *river.Client[pgx.Tx]
	cancelRiver context.CancelFunc
	cancelUI    context.CancelFunc
	http        *http.Server
	processLock *liveness.ProcessLock
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
