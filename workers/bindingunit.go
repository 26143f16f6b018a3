package workers

import (
	"context"
	"errors"
	"log/slog"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/slots"
)

// bindingUnit is what a folder-level work unit (a folder pass, a
// reconciliation window) holds while it runs: the account's configuration,
// the connection with the unit's liveness lock and concurrency slots, and
// the alias's latest binding.
type bindingUnit struct {
	account config.Account
	conn    *pgxpool.Conn
	binding mailstore.Binding
	release func()
}

// openBindingUnit prepares a folder-level work unit of job jobID for alias
// of accountID. It returns a nil unit and a nil error when there is nothing
// to do (the account is no longer configured, synchronization is disabled,
// the alias has no binding yet), and river.JobSnooze when a concurrency
// bound is reached or the account's server throttles it. The caller defers
// unit.release.
func (d Dependencies) openBindingUnit(ctx context.Context, jobID int64, accountID, alias string, logger *slog.Logger) (*bindingUnit, error) {
	cfg := d.Config
	account, ok := cfg.Account(accountID)
	if !ok || !cfg.Sync.Enabled {
		logger.InfoContext(ctx, "skipped: the account is no longer configured or synchronization is disabled")
		return nil, nil
	}
	if err := d.waitOutThrottle(ctx, d.Pool, config.AccountKey(account.ID), logger); err != nil {
		return nil, err
	}
	leave, err := d.enterGate(ctx, config.AccountKey(account.ID), alias, gatePatience)
	if errors.Is(err, slots.ErrFull) {
		return nil, river.JobSnooze(d.deferral())
	}
	if err != nil {
		return nil, err
	}
	conn, releaseConn, err := d.acquireWorkConn(ctx, jobID)
	if err != nil {
		leave()
		return nil, err
	}
	held, err := slots.Acquire(ctx, conn, config.AccountKey(account.ID), alias, bounds(cfg))
	if err != nil {
		leave()
		wait := d.deferral()
		if errors.Is(err, slots.ErrFull) {
			// A folder whose server reported a change waits only moments
			// for a slot, which a sibling's pass or window gives back as it
			// ends: the report is what push synchronization exists for.
			if reported, rerr := mailstore.ChangeReported(ctx, conn, config.AccountKey(account.ID), alias); rerr == nil && reported {
				wait = reportedDeferral()
			}
		}
		releaseConn()
		if errors.Is(err, slots.ErrFull) {
			return nil, river.JobSnooze(wait)
		}
		return nil, err
	}
	release := func() {
		_ = held.Release(context.WithoutCancel(ctx))
		releaseConn()
		leave()
	}
	id, err := mailstore.EnsureAccount(ctx, conn, config.AccountKey(account.ID))
	if err != nil {
		release()
		return nil, err
	}
	binding, ok, err := mailstore.LatestBinding(ctx, conn, id, alias)
	if err != nil || !ok {
		release()
		if err == nil {
			logger.InfoContext(ctx, "skipped: the alias has no binding yet")
		}
		return nil, err
	}
	return &bindingUnit{account: account, conn: conn, binding: binding, release: release}, nil
}

// carriedUnit is the unit of alias a carrier runs on conn, its work
// connection, within the slots it holds (see carryPasses): it only reads
// the alias's latest binding, and returns a nil unit and a nil error when
// the alias has none.
func (d Dependencies) carriedUnit(ctx context.Context, conn *pgxpool.Conn, account config.Account, alias string, logger *slog.Logger) (*bindingUnit, error) {
	id, err := mailstore.EnsureAccount(ctx, conn, config.AccountKey(account.ID))
	if err != nil {
		return nil, err
	}
	binding, ok, err := mailstore.LatestBinding(ctx, conn, id, alias)
	if err != nil || !ok {
		if err == nil {
			logger.InfoContext(ctx, "skipped: the alias has no binding yet")
		}
		return nil, err
	}
	return &bindingUnit{account: account, conn: conn, binding: binding, release: func() {}}, nil
}
