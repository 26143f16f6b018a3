package workers

import (
	"context"
	"log/slog"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// An account with a daily download budget
// (MAILFATHOM_ACCOUNTS_<i>_MAX_DOWNLOAD_BYTES_PER_DAY) spends it in its
// folder passes: each claims an allowance of what the rolling 24-hour
// window leaves before it asks the server for anything, downloads at most
// that, and settles the claim with what it asked for once it ends
// (mailstore.ClaimDownload, SettleDownload), in PostgreSQL so the
// replicas share one budget. A pass that stopped before a message the
// window cannot hold snoozes until enough of the window has expired, and
// the folder continues from its checkpoint then; one whose allowance ran
// out while the window still has room goes on at once, as a pass at its
// batch bound does. A budget reached is a schedule, not a failure.

// downloadClaim is a folder pass's claim on its account's budget.
type downloadClaim struct {
	deps    Dependencies
	account config.Account
	claim   mailstore.DownloadClaim
	settled bool
}

// claimDownload claims a pass's allowance of account's budget, in a
// transaction of its own on q. Without a budget it claims nothing and the
// pass is unbounded (a zero allowance). When the window leaves no room it
// returns the snooze that makes the pass wait until there is, and logs
// why. The pass settles the claim with settle, once, however it ends.
func (d Dependencies) claimDownload(ctx context.Context, q interface {
	Begin(context.Context) (pgx.Tx, error)
}, account config.Account, logger *slog.Logger) (*downloadClaim, error) {
	c := &downloadClaim{deps: d, account: account}
	budget := account.MaxDownloadBytesPerDay
	if budget <= 0 {
		c.settled = true
		return c, nil
	}
	// Passes of the account running at once each get a share, one that
	// holds any message whose content is stored.
	share := max(budget/int64(max(d.Config.Sync.MaxConcurrentFoldersPerAccount, 1)), d.Config.Sync.MaxRawMimeBytes)
	var resume time.Time
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		var err error
		c.claim, resume, err = mailstore.ClaimDownload(ctx, tx, config.AccountKey(account.ID), budget, share, d.Now())
		return err
	})
	if err != nil {
		return nil, err
	}
	if c.claim.Bytes == 0 {
		c.settled = true
		wait := max(resume.Sub(d.Now()), 0)
		logger.InfoContext(ctx, "the account's daily download budget is spent; the folder continues when the window has room",
			slog.Int64("budget_bytes", budget), slog.Time("continues_at", resume), slog.Duration("wait", wait))
		return nil, river.JobSnooze(wait)
	}
	return c, nil
}

// allowance is what the pass may download: 0 (unbounded) without a
// budget.
func (c *downloadClaim) allowance() int64 { return c.claim.Bytes }

// settle replaces the claim with requested, the declared size of what
// the pass asked for, and, when the pass stopped before a message of
// needed bytes (0: it did not), returns the snooze after which the folder
// continues: until the window has room for it, or at once when it has
// room already. It is a no-op after the first call. A settle that fails
// leaves the whole claim counted, which errs on the provider's side; it
// is logged and the pass's outcome stands.
func (c *downloadClaim) settle(ctx context.Context, q interface {
	Begin(context.Context) (pgx.Tx, error)
}, requested, needed int64, logger *slog.Logger) error {
	if c.settled {
		return nil
	}
	c.settled = true
	ctx = context.WithoutCancel(ctx)
	var (
		resume time.Time
		paused bool
	)
	err := pgx.BeginFunc(ctx, q, func(tx pgx.Tx) error {
		var err error
		resume, paused, err = mailstore.SettleDownload(ctx, tx, config.AccountKey(c.account.ID), c.claim, requested, needed,
			c.account.MaxDownloadBytesPerDay, c.deps.Now())
		return err
	})
	if err != nil {
		logger.WarnContext(ctx, "the pass's download could not be settled; its whole allowance stays counted", slog.String("error", err.Error()))
		if needed > 0 {
			return river.JobSnooze(c.deps.deferral())
		}
		return nil
	}
	switch {
	case needed <= 0:
		return nil
	case paused:
		wait := max(resume.Sub(c.deps.Now()), 0)
		logger.InfoContext(ctx, "the pass stopped at the account's daily download budget, its checkpoint committed; the folder continues when the window has room",
			slog.Int64("budget_bytes", c.account.MaxDownloadBytesPerDay), slog.Int64("next_message_bytes", needed),
			slog.Time("continues_at", resume), slog.Duration("wait", wait))
		return river.JobSnooze(wait)
	}
	// The pass's share ran out while the window still has room.
	return river.JobSnooze(0)
}
