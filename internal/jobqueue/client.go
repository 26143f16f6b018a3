// Package jobqueue builds the River client every unit of MailFathom's work
// runs on: its queues and worker counts, the error handler, and the logging
// and metrics middleware.
//
// It knows no job kind. Workers are registered by the caller (see package
// workers); jobqueue only decides how they are run.
package jobqueue

import (
	"cmp"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivertype"

	"github.com/mailfathom/mailfathom/jobs"
)

// Config is what NewClient needs.
type Config struct {
	// Pool is the database the queue lives in. Required.
	Pool *pgxpool.Pool
	// Workers holds every registered worker. Required.
	Workers *river.Workers
	// QueueWorkers is the number of concurrent workers per queue name; a
	// queue absent or at zero is not worked by this process (it can still be
	// inserted into). At least one queue must have workers.
	QueueWorkers map[string]int
	// Logger receives River's and the middleware's logs. Default: discard.
	Logger *slog.Logger
	// Metrics, when set, records job attempts. Default: none.
	Metrics *Metrics
	// Middleware are worker middleware installed inside the logging and
	// metrics middleware, so what they make of a job's outcome is what is
	// logged and counted (the workers' failure classification). Default:
	// none.
	Middleware []rivertype.WorkerMiddleware
	// JobTimeout bounds one job attempt unless its worker says otherwise.
	// Default: River's one minute.
	JobTimeout time.Duration
	// ID names this client in River's leader election and in River UI.
	// Default: River's generated name.
	ID string
}

// NewClient builds, but does not start, the River client.
func NewClient(cfg Config) (*river.Client[pgx.Tx], error) {
	if cfg.Pool == nil {
		return nil, errors.New("jobqueue: Pool is required")
	}
	logger := cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))

	if cfg.Workers == nil {
		return nil, errors.New("jobqueue: Workers is required")
	}
	for name := range cfg.QueueWorkers {
		if !slices.Contains(jobs.Queues, name) {
			return nil, fmt.Errorf("jobqueue: unknown queue %q", name)
		}
	}
	queues := map[string]river.QueueConfig{}
	for _, name := range jobs.Queues {
		if n := cfg.QueueWorkers[name]; n > 0 {
			queues[name] = river.QueueConfig{MaxWorkers: n, FetchPollInterval: pollInterval(name)}
		}
	}
	if len(queues) == 0 {
		return nil, errors.New("jobqueue: no queue has workers")
	}

	middleware := []rivertype.Middleware{&LoggingMiddleware{Logger: logger}}
	if cfg.Metrics != nil {
		middleware = append(middleware, cfg.Metrics)
	}
	for _, m := range cfg.Middleware {
		middleware = append(middleware, m)
	}

	client, err := river.NewClient(riverpgxv5.New(cfg.Pool), &river.Config{
		ErrorHandler: &ErrorHandler{Logger: logger},
		ID:           cfg.ID,
		JobTimeout:   cfg.JobTimeout,
		Logger:       logger,
		Middleware:   middleware,
		Queues:       queues,
		Workers:      cfg.Workers,
	})
	if err != nil {
		return nil, fmt.Errorf("jobqueue: new river client: %w", err)
	}
	return client, nil
}

// pollInterval is how often a queue looks for work that arrived without a
// notification. A folder pass that continues past its batch bound snoozes
// itself back to available, which River announces to nobody; on River's
// one-second default a large first synchronization would idle between its
// passes. Other queues keep the default.
func pollInterval(queue string) time.Duration {
	switch queue {
	case jobs.QueueFolders, jobs.QueueAccounts:
		return 100 * time.Millisecond
	}
	return 0
}

// NewInsertClient builds a River client that only inserts jobs: it works
// no queue and is never started. The command line uses it to record work
// (a mailbox mutation's first stage) that a serving process carries out.
func NewInsertClient(pool *pgxpool.Pool) (*river.Client[pgx.Tx], error) {
	if pool == nil {
		return nil, errors.New("jobqueue: Pool is required")
	}
	client, err := river.NewClient(riverpgxv5.New(pool), &river.Config{Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return nil, fmt.Errorf("jobqueue: new river insert client: %w", err)
	}
	return client, nil
}
