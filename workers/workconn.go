package workers

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/resilience"
)

// workConn is a connection holding its job's liveness lock, and the way to
// give it back.
type workConn struct {
	conn    *pgxpool.Conn
	release func()
}

// acquireWorkConn takes the connection a work unit keeps for its whole run,
// holding the job's liveness lock (liveness.Acquire).
//
// Acquiring and locking is a command path that owns no transaction, so it
// runs under the DatabaseCommandExecution pipeline (one shared instance): a
// database that is briefly unreachable is tried again within the pipeline's
// budget, and one that stays away opens the shared circuit, so every job
// then fails fast as DependencyUnavailable and River attempts it later. A
// connection an abandoned attempt obtained anyway is given back with its
// lock (resilience.Acquire), so neither outlives the attempt.
func (d Dependencies) acquireWorkConn(ctx context.Context, jobID int64) (*pgxpool.Conn, func(), error) {
	key := resilience.Key{Class: resilience.DatabaseCommandExecution, Instance: resilience.SharedInstance}
	wc, err := resilience.Acquire(ctx, d.Resilience, key, "work-connection", func(ctx context.Context) (workConn, error) {
		conn, release, err := d.acquireConn(ctx, d.Pool, jobID)
		return workConn{conn: conn, release: release}, err
	}, func(wc workConn) { wc.release() })
	if err != nil {
		return nil, nil, err
	}
	return wc.conn, wc.release, nil
}
