package service

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/embedding"
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
	"github.com/mailfathom/mailfathom/workers"
)

// listen binds the HTTP address before anything else starts: a taken
// address fails at once, before a database is started or migrated.
func (r *running) listen(context.Context) error {
	ln, err := net.Listen("tcp", r.opts.HTTPAddr)
	if err != nil {
		return fmt.Errorf("MAILFATHOM_HTTP_ADDR (%s) cannot be listened on; another process may hold it: %w", r.opts.HTTPAddr, err)
	}
	r.ln = ln
	return nil
}

// openDatabase starts the embedded cluster when no database is configured,
// opens the pool, and migrates the schema or checks that it is current.
func (r *running) openDatabase(ctx context.Context) error {
	connString := r.opts.DatabaseConnString
	if connString == "" {
		db, err := pgcluster.StartEmbedded(ctx, r.opts.EmbeddedDataDir, r.logger)
		if err != nil {
			return err
		}
		r.embedded = db
		connString = db.ConnString
	}
	r.cfg = r.opts.Config
	if r.cfg == nil {
		cfg, err := config.Load(nil)
		if err != nil {
			return err
		}
		r.cfg = cfg
	}
	// Account and folder jobs each hold one connection for their whole
	// run (their concurrency slots are advisory locks on it), a folder pass
	// writes through a second, and River and the liveness lock need a few of
	// their own: the pool is never smaller than that.
	queues := r.opts.QueueWorkers
	maxConns := max(r.opts.DatabaseMaxConns, int32(queues[jobs.QueueAccounts]+2*queues[jobs.QueueFolders]+5))
	pool, err := database.Open(ctx, database.Options{
		ConnString: connString,
		Password:   r.opts.DatabasePassword,
		MaxConns:   maxConns,
	})
	if err != nil {
		return err
	}
	r.pool = pool
	if err := pingDatabase(ctx, pool, r.logger); err != nil {
		return err
	}
	if err := migrateOrCheck(ctx, pool, r.opts.MigrateOnStart, r.logger); err != nil {
		return err
	}
	return searchindex.CheckConfiguration(ctx, pool, r.cfg.Persistence.TextSearchConfiguration)
}

// registerMetrics creates the process's metrics registry with the Go and
// process collectors and the job and push metrics.
func (r *running) registerMetrics(context.Context) error {
	r.reg = prometheus.NewRegistry()
	r.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	var err error
	if r.jobMetrics, err = jobqueue.NewMetrics(r.reg); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if r.pushMetrics, err = push.NewMetrics(r.reg); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// takeProcessLock takes the process's liveness lock before River starts,
// so every job this process fetches is covered from its first moment; it
// is held on a connection of its own for the process's whole life.
func (r *running) takeProcessLock(ctx context.Context) error {
	r.clientID = processID()
	lock, err := liveness.TakeProcessLock(ctx, r.pool, r.clientID, r.logger)
	if err != nil {
		return fmt.Errorf("take the process liveness lock: %w", err)
	}
	r.processLock = lock
	lock.Keep(processLockCheck)
	return nil
}

// buildWorkers builds the outbound pipelines, the mailbox OAuth source and
// the embedding client, and registers every worker.
func (r *running) buildWorkers(context.Context) error {
	cfg := r.cfg
	pipelines, err := outbound.NewRegistry(cfg.Resilience, r.logger, r.reg)
	if err != nil {
		return fmt.Errorf("resilience: %w", err)
	}
	r.pipelines = pipelines
	resolver := cmp.Or(r.opts.Resolver, &secret.Resolver{})
	tokens, err := mailoauth.NewSource(mailoauth.Options{Resolver: resolver, Registry: pipelines, Logger: r.logger})
	if err != nil {
		return fmt.Errorf("mailbox OAuth: %w", err)
	}
	r.stopping = make(chan struct{})
	r.deps = workers.Dependencies{Pool: r.pool, Config: cfg, Resolver: resolver, Logger: r.logger, Resilience: pipelines, Tokens: tokens, Stopping: r.stopping, Push: r.pushMetrics,
		VectorIndex: searchindex.NewVectorIndex()}
	if cfg.Embedding.Configured() {
		if r.deps.EmbeddingMetrics, err = embedding.NewMetrics(r.reg); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		if err := r.reg.Register(embedding.NewCollector(r.pool)); err != nil {
			return fmt.Errorf("metrics: %w", err)
		}
		if r.deps.Embedder, err = embedding.NewClient(embedding.Options{
			URL:      cfg.Embedding.ProviderURL,
			Profile:  embedding.Profile{Model: cfg.Embedding.Model, Dimensions: cfg.Embedding.Dimensions},
			APIKey:   cfg.Embedding.APIKey,
			Resolver: resolver,
			Registry: pipelines,
			Metrics:  r.deps.EmbeddingMetrics,
		}); err != nil {
			return err
		}
	}
	if r.deps, err = workers.NewDependencies(r.deps); err != nil {
		return err
	}
	r.ws = river.NewWorkers()
	r.failures, err = workers.Register(r.ws, r.deps)
	return err
}

// startRiver starts the River client on a context of its own: shutdown is
// Drain's job, and a cancelled Start context would begin a stop of River's
// own choosing.
func (r *running) startRiver(ctx context.Context) error {
	client, err := jobqueue.NewClient(jobqueue.Config{
		Pool:         r.pool,
		Workers:      r.ws,
		QueueWorkers: r.opts.QueueWorkers,
		Logger:       r.logger,
		Metrics:      r.jobMetrics,
		Middleware:   []rivertype.WorkerMiddleware{r.failures},
		ID:           r.clientID,
	})
	if err != nil {
		return err
	}
	riverCtx, cancelRiver := context.WithCancel(context.WithoutCancel(ctx))
	if err := client.Start(riverCtx); err != nil {
		cancelRiver()
		return fmt.Errorf("start river: %w", err)
	}
	r.river, r.cancelRiver = client, cancelRiver
	return nil
}

// sweepOrphans hands back the jobs a dead process left running, now and
// once more when the sweep's grace for clock skew has passed: a job its
// predecessor fetched moments before dying is inside that grace, and the
// leader's periodic sweep only runs in a restarted process once the dead
// leader's lease has expired.
func (r *running) sweepOrphans(ctx context.Context) error {
	if err := workers.SweepOrphans(ctx, r.deps, r.logger); err != nil {
		return err
	}
	r.housekeeping, r.cancelHousekeeping = context.WithCancel(ctx)
	go func() {
		select {
		case <-r.housekeeping.Done():
		case <-time.After(workers.OrphanGrace + 500*time.Millisecond):
			if err := workers.SweepOrphans(r.housekeeping, r.deps, r.logger); err != nil && r.housekeeping.Err() == nil {
				r.logger.WarnContext(ctx, "the second startup sweep failed", slog.String("error_type", fmt.Sprintf("%T", err)))
			}
		}
	}()
	return nil
}

// registerCollectors registers the collectors that read the database at
// scrape time: status, mutations.
func (r *running) registerCollectors(context.Context) error {
	r.statusOpts = workers.StatusOptions(r.deps)
	if err := r.reg.Register(status.NewCollector(r.pool, r.statusOpts)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := r.reg.Register(mutation.NewCollector(r.pool, r.cfg)); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	return nil
}

// scheduleWork gives every configured account its run, then starts
// housekeeping, then schedules the backfills and the vector index.
// Housekeeping starts once every account has its run: started while the
// accounts were still being scheduled (half a minute for a thousand), its
// repair found the rest without one and warned about each.
func (r *running) scheduleWork(ctx context.Context) error {
	repaired := prometheus.NewCounter(prometheus.CounterOpts{
		Name: "mailfathom_account_runs_repaired_total",
		Help: "Account runs the maintenance leader scheduled because a configured account had none coming (cancelled, deleted or discarded).",
	})
	if err := r.reg.Register(repaired); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	n, err := workers.ScheduleConfiguredAccounts(ctx, r.deps, r.river)
	if err != nil {
		return fmt.Errorf("schedule account runs: %w", err)
	}
	go workers.Maintain(r.housekeeping, r.deps, r.river, r.processLock.Leading, repaired, r.logger)
	r.logger.InfoContext(ctx, "synchronization scheduled", slog.Bool("enabled", r.cfg.Sync.Enabled),
		slog.Int("accounts", len(r.cfg.Accounts)), slog.Int("runs_started", n))
	if _, err := workers.ScheduleExtractionBackfill(ctx, r.deps, r.river); err != nil {
		return err
	}
	if _, err := workers.ScheduleEmbeddingBackfill(ctx, r.deps, r.river); err != nil {
		return err
	}
	_, err = workers.ScheduleVectorIndex(ctx, r.deps, r.river)
	return err
}

// mountRoutes builds the HTTP routes: the probes and /metrics always, and
// with River UI enabled, River UI, status, search, mutations and MCP behind
// its credentials.
func (r *running) mountRoutes(ctx context.Context) error {
	r.routes = httpserver.Routes{Ready: readiness(r.pool), Gatherer: r.reg}
	if !r.opts.UIEnabled {
		return nil
	}
	password := r.opts.UIPassword
	if password == nil {
		if r.embedded == nil {
			//lint:ignore ST1005 "River UI" is the job queue's dashboard, a proper name, so its capital stays.
			return errors.New("River UI needs a password when a database is configured")
		}
		var err error
		if password, r.uiLine, err = embeddedUIPassword(r.opts.EmbeddedDataDir); err != nil {
			return err
		}
	}
	ui, err := riverui.New(r.river, riverui.Credentials{Username: r.opts.UIUsername, Password: password}, r.logger)
	if err != nil {
		return err
	}
	uiCtx, cancelUI := context.WithCancel(context.WithoutCancel(ctx))
	if err := ui.Start(uiCtx); err != nil {
		cancelUI()
		return err
	}
	r.cancelUI = cancelUI
	statusHandler := status.NewHandler(r.pool, r.statusOpts, r.logger)
	var accounts []string
	for _, a := range r.cfg.Accounts {
		accounts = append(accounts, config.AccountKey(a.ID))
	}
	searcher := &mailsearch.Searcher{
		Querier: r.pool, Registry: r.pipelines, Configuration: r.cfg.Persistence.TextSearchConfiguration,
		Accounts: accounts, Embedder: r.deps.Embedder, Index: r.deps.VectorIndex,
	}
	searchHandler := mailsearch.NewHandler(searcher, r.logger)
	mutations := mutation.NewHandler(r.pool, r.cfg, r.river, r.logger)
	mcpHandler, err := newMCPHandler(r.pool, r.cfg, searcher, r.river, r.statusOpts, r.reg, r.logger)
	if err != nil {
		return err
	}
	r.routes.Mount = func(mux *http.ServeMux) {
		ui.Mount(mux)
		statusHandler.Mount(mux, ui.Protect)
		searchHandler.Mount(mux, ui.Protect)
		mutations.Mount(mux, ui.Protect)
		mux.Handle(mcpPath, ui.Protect(mcpHandler))
	}
	return nil
}

// serve starts the HTTP server and tells the operator where everything is.
func (r *running) serve(ctx context.Context) error {
	srv := &http.Server{
		Handler:           httpserver.NewMux(r.routes),
		ReadHeaderTimeout: 10 * time.Second,
		ErrorLog:          slog.NewLogLogger(r.logger.Handler(), slog.LevelWarn),
	}
	r.serveErr = make(chan error, 1)
	go func() { r.serveErr <- srv.Serve(r.ln) }()
	r.http = srv

	console := cmp.Or[io.Writer](r.opts.Console, io.Discard)
	addr := r.ln.Addr().String()
	r.logger.InfoContext(ctx, "serving", slog.String("addr", addr),
		slog.Bool("river_ui", r.opts.UIEnabled), slog.Bool("embedded_database", r.embedded != nil))
	if r.opts.UIEnabled {
		fmt.Fprintf(console, "River UI: http://%s%s/ (user %q)\n", addr, riverui.Prefix, r.opts.UIUsername)
		fmt.Fprintf(console, "MCP: http://%s%s (the same user)\n", addr, mcpPath)
		if r.uiLine != "" {
			fmt.Fprintln(console, r.uiLine)
		}
	}
	fmt.Fprintf(console, "Health: http://%s/healthz  Readiness: http://%s/readyz  Metrics: http://%s/metrics\n", addr, addr, addr)
	if r.opts.AccountCount == 0 {
		r.logger.InfoContext(ctx, "no mailbox account is configured, so nothing is synchronized; add one with MAILFATHOM_ACCOUNTS_0_ID, MAILFATHOM_ACCOUNTS_0_HOST, MAILFATHOM_ACCOUNTS_0_USERNAME and MAILFATHOM_ACCOUNTS_0_PASSWORD (a secret reference such as file:/run/secrets/imap) and set MAILFATHOM_SYNC_ENABLED=true; the README lists every variable")
	}
	if r.opts.Listening != nil {
		r.opts.Listening(addr)
	}
	return nil
}
