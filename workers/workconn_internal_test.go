package workers

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/liveness"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// A work connection whose acquisition outlives the attempt timeout — it
// is obtained anyway, as the pipeline gives up — is given back with its
// liveness lock, not left in use by nobody.
func TestWorkConnectionOfAnAbandonedAttemptIsReleased(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	cfg, err := config.Load(nil)
	require.NoError(t, err)
	budgets := resilience.DefaultBudgets()
	db := budgets[resilience.DatabaseCommandExecution]
	db.AttemptTimeout, db.MaxAttempts = 50*time.Millisecond, 2
	db.BaseDelay, db.MaxDelay = time.Millisecond, time.Millisecond
	budgets[resilience.DatabaseCommandExecution] = db
	reg, err := outbound.NewRegistry(budgets, nil, nil)
	require.NoError(t, err)
	attempts := 0
	deps, err := NewDependencies(Dependencies{Pool: pool, Config: cfg, Resilience: reg,
		acquireConn: func(ctx context.Context, pool *pgxpool.Pool, jobID int64) (*pgxpool.Conn, func(), error) {
			attempts++
			// Obtained whatever the attempt's context says, and only once
			// the attempt has been abandoned.
			conn, release, err := liveness.Acquire(context.WithoutCancel(ctx), pool, jobID)
			<-ctx.Done()
			return conn, release, err
		},
	})
	require.NoError(t, err)

	_, _, err = deps.acquireWorkConn(ctx, 42)
	require.True(t, failure.IsDependencyUnavailable(err), "%v", err)
	require.Equal(t, 2, attempts)
	require.Zero(t, pool.Stat().AcquiredConns(), "no connection is left in use")
	require.Zero(t, dbassert.AdvisoryLocks(t, pool), "no liveness lock outlives the attempt")
}
