package workers

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/liveness"
)

// acquireWorkConn takes the connection a work unit keeps for its whole run
// and holds the job's liveness lock on it (see package liveness); the
// unit's concurrency slots are taken on the same connection. release drops
// every advisory lock the connection holds before giving it back to the
// pool, and closes it instead when that fails, so no lock ever outlives
// its work unit inside a pooled connection.
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
