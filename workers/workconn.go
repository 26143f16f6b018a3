package workers

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/resilience"
)

// acquireWorkConn takes the connection a work unit keeps for its whole run
// and holds the job's liveness lock on it (see package liveness); the
// unit's concurrency slots are taken on the same connection. release drops
// every advisory lock the connection holds before giving it back to the
// pool, and closes it instead when that fails, so no lock ever outlives
// its work unit inside a pooled connection.
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
		conn, release, err = acquireWorkConn(ctx, d.Pool, jobID)
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return conn, release, nil
}

func acquireWorkConn(ctx context.Context, pool *pgxpool.Pool, jobID int64) (*pgxpool.Conn, func(), error) {
	conn, err := pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("acquire a connection: %w", err)
	}
	release := func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}
	if err := liveness.Hold(ctx, conn, jobID); err != nil {
		release()
		return nil, nil, err
	}
	return conn, release, nil
}
