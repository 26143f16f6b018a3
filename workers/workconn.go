package workers

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// acquireWorkConn takes the connection a work unit keeps for its whole run,
// holding the job's liveness lock (liveness.Acquire).
//
// Acquiring and locking is a command path that owns no transaction, so it
// runs under the DatabaseCommandExecution pipeline (one shared instance): a
// database that is briefly unreachable is tried again within the pipeline's
// budget, and one that stays away opens the shared circuit, so every job
// then fails fast as DependencyUnavailable and River attempts it later.
func (d Dependencies) acquireWorkConn(ctx context.Context, jobID int64) (*pgxpool.Conn, func(), error) {
	var (
		conn    *pgxpool.Conn
		release func()
	)
	key := resilience.Key{Class: resilience.DatabaseCommandExecution, Instance: resilience.SharedInstance}
	err := d.Resilience.Execute(ctx, key, "work-connection", func(ctx context.Context) error {
		var err error
		conn, release, err = liveness.Acquire(ctx, d.Pool, jobID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return conn, release, nil
}
