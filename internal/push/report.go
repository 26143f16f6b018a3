package push

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/jobs"
)

// reported starts a pass for every watched folder in changed (remote
// paths; INBOX matched without regard to case). A path no watched folder
// has is ignored.
func (wt *watch) reported(ctx context.Context, watched []watchedFolder, changed []string) error {
	for _, path := range changed {
		for _, f := range watched {
			if f.path != path && !(path == "INBOX" && strings.EqualFold(f.path, path)) {
				continue
			}
			wt.logger.InfoContext(ctx, "mail server reported a change in a watched folder", slog.String("alias", f.alias))
			wt.opts.Metrics.notified(wt.account.ID, f.alias)
			if err := wt.requestPass(ctx, f.alias, true); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp queues a pass for each folder, as a session starts watching
// them: a change made while nothing watched would otherwise wait for the
// interval. A pass already queued or running is left as it is, and a
// failure to queue is logged, not returned: the interval still covers the
// folder.
func (wt *watch) catchUp(ctx context.Context, folders []watchedFolder) {
	for _, f := range folders {
		if err := wt.requestPass(ctx, f.alias, false); err != nil && ctx.Err() == nil {
			wt.logger.WarnContext(ctx, "could not queue the folder's pass", slog.String("alias", f.alias), slog.String("error", err.Error()))
		}
	}
}

// requestPass queues alias's pass to run now, in one transaction. With
// report it also leaves the mark a running pass reads before it completes
// (mailstore.ReportChange), and makes a pass waiting out a retry due now
// (jobqueue.MakeFolderPassDue). It never runs the pass itself.
func (wt *watch) requestPass(ctx context.Context, alias string, report bool) error {
	return pgx.BeginFunc(ctx, wt.opts.Pool, func(tx pgx.Tx) error {
		if report {
			if err := mailstore.ReportChange(ctx, tx, wt.key, alias, wt.opts.Now()); err != nil {
				return err
			}
		}
		duplicate, err := wt.opts.QueuePass(ctx, tx, jobs.FolderPass{AccountID: wt.account.ID, Alias: alias})
		if err != nil {
			return fmt.Errorf("watch: queue the folder's pass: %w", err)
		}
		if report && duplicate {
			_, err = jobqueue.MakeFolderPassDue(ctx, tx, jobs.FolderPass{}.Kind(), wt.key, alias)
		}
		return err
	})
}
