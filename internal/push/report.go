package push

import (
	"context"
	"fmt"
	"log/slog"
	"strings"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/imapx"
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
			if err := wt.requestPass(ctx, f.alias); err != nil {
				return err
			}
		}
	}
	return nil
}

// catchUp queues a pass for each of folders that may have changed while
// nothing watched it, as a session starts watching them: one whose state
// as the server reports it now (states, by remote path: the session's
// EXAMINE, or the STATUS its subscription asked for) differs from what the
// folder's last completed pass observed (mailstore.ObservedStates); one no
// pass has completed since it was bound; and one the server did not
// describe. A folder that did not change is left to the interval: a
// session that reconnects, re-arms or is recycled does not make its
// folders synchronize again.
//
// When the folder's pass is already queued or running, it may have
// examined the folder before the change: the pass is marked to go around
// once more (mailstore.ReportChange). A failure to queue is logged, not
// returned: the interval still covers the folder.
func (wt *watch) catchUp(ctx context.Context, folders []watchedFolder, states map[string]imapx.FolderState) {
	observed, err := mailstore.ObservedStates(ctx, wt.opts.Pool, wt.key)
	if err != nil {
		// Conservative: without the observations, every folder catches up.
		wt.logger.WarnContext(ctx, "could not read what the folders' last passes observed", slog.String("error", err.Error()))
	}
	for _, f := range folders {
		o, seen := observed[f.alias]
		st, described := states[f.path]
		if seen && described && unchanged(o, f, st) {
			continue
		}
		wt.logger.InfoContext(ctx, "folder may have changed while it was not watched; its pass is queued", slog.String("alias", f.alias))
		if err := wt.catchUpPass(ctx, f.alias); err != nil && ctx.Err() == nil {
			wt.logger.WarnContext(ctx, "could not queue the folder's pass", slog.String("alias", f.alias), slog.String("error", err.Error()))
		}
	}
}

// unchanged reports whether st, what the server reports of f now, is what
// the folder's last completed pass observed (o): the same binding, and the
// same UIDVALIDITY, UIDNEXT, message count and HIGHESTMODSEQ. A state
// without UIDNEXT says nothing of new mail, so it is never unchanged.
// Without CONDSTORE, a flag change moves none of the numbers; the
// interval covers it, as it does for an account that polls.
func unchanged(o mailstore.ObservedState, f watchedFolder, st imapx.FolderState) bool {
	return o.BindingID == f.bindingID && st.UIDNext != 0 &&
		o.UIDValidity == st.UIDValidity && o.UIDNext == st.UIDNext &&
		o.Exists == st.Exists && o.HighestModSeq == st.HighestModSeq
}

// catchUpPass queues alias's pass to run now, in one transaction; when an
// equal pass is already queued or running, it leaves the mark that makes
// a running pass go around once more before it completes.
func (wt *watch) catchUpPass(ctx context.Context, alias string) error {
	return pgx.BeginFunc(ctx, wt.opts.Pool, func(tx pgx.Tx) error {
		duplicate, err := wt.opts.QueuePass(ctx, tx, jobs.FolderPass{AccountID: wt.account.ID, Alias: alias})
		if err != nil {
			return fmt.Errorf("watch: queue the folder's pass: %w", err)
		}
		if !duplicate {
			return nil
		}
		return mailstore.ReportChange(ctx, tx, wt.key, alias, wt.opts.Now())
	})
}

// requestPass queues alias's pass to run now, in one transaction, for a
// change the server reported: it also leaves the mark a running pass reads
// before it completes (mailstore.ReportChange), and makes a pass waiting
// out a retry due now (jobqueue.MakeFolderPassDue). It never runs the pass
// itself.
func (wt *watch) requestPass(ctx context.Context, alias string) error {
	return pgx.BeginFunc(ctx, wt.opts.Pool, func(tx pgx.Tx) error {
		if err := mailstore.ReportChange(ctx, tx, wt.key, alias, wt.opts.Now()); err != nil {
			return err
		}
		duplicate, err := wt.opts.QueuePass(ctx, tx, jobs.FolderPass{AccountID: wt.account.ID, Alias: alias})
		if err != nil {
			return fmt.Errorf("watch: queue the folder's pass: %w", err)
		}
		if duplicate {
			_, err = jobqueue.MakeFolderPassDue(ctx, tx, jobs.FolderPass{}.Kind(), wt.key, alias)
		}
		return err
	})
}
