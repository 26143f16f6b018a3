package liveness

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Acquire takes the connection a job keeps for its whole run and holds the
// job's liveness lock on it (Hold); the job's concurrency slots (package
// slots) are taken on the same connection. release drops every advisory
// lock the connection holds before giving it back to the pool, and closes
// it instead when that fails, so no lock ever outlives its job inside a
// pooled connection.
func Acquire(ctx context.Context, pool *pgxpool.Pool, jobID int64) (conn *pgxpool.Conn, release func(), err error) {
	conn, err = pool.Acquire(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("liveness: acquire a connection: %w", err)
	}
	release = func() {
		ctx := context.WithoutCancel(ctx)
		if _, err := conn.Exec(ctx, "SELECT pg_advisory_unlock_all()"); err != nil {
			_ = conn.Conn().Close(ctx)
		}
		conn.Release()
	}
	if err := Hold(ctx, conn, jobID); err != nil {
		release()
		return nil, nil, err
	}
	return conn, release, nil
}
