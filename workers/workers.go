// Package workers holds MailFathom's River workers, each the orchestration
// of one unit of work (an account run, a folder pass, a reconciliation
// window, a backfill batch, a mutation stage, an embedding offer).
//
// Workers classify their own failures for River: a transient dependency
// failure is returned as an error and retried on River's schedule, a
// permanent one is returned as river.JobCancel, and a deferral (another run
// holds the account, a concurrency conflict) as river.JobSnooze.
package workers

import (
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
)

// Dependencies are what the workers are built from.
type Dependencies struct {
	// Pool is the application database. Required.
	Pool *pgxpool.Pool
	// Logger is the fallback logger; a job's own logger comes from its
	// context (jobqueue.Logger).
	Logger *slog.Logger
}

// Register adds every MailFathom worker to ws and returns how many it added.
// None of the job kinds has landed yet, so it adds none: the service then
// runs River as an insert-only client (River refuses to work queues with an
// empty registry) until the first worker arrives.
func Register(ws *river.Workers, deps Dependencies) (int, error) {
	if ws == nil || deps.Pool == nil {
		return 0, errors.New("workers: a registry and a pool are required")
	}
	return 0, nil
}
