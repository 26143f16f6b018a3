package push

import (
	"context"
	"log/slog"
	"strings"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// setModes records mode (mailstore.ModePush or ModePolling) for folders
// and logs each folder whose mode changed.
func (wt *watch) setModes(ctx context.Context, folders []watchedFolder, mode string) {
	for _, f := range folders {
		wt.setMode(ctx, f, mode)
	}
}

// setMode records mode for f — in the metrics and as the folder's
// effective mode (mailstore.SetEffectiveMode), even as ctx ends — logs it
// when it changed and reports whether it did. A failure to record is
// logged, not returned: the mode is what status shows, not what the watch
// does.
func (wt *watch) setMode(ctx context.Context, f watchedFolder, mode string) bool {
	wt.opts.Metrics.setMode(wt.account.ID, f.alias, mode)
	changed, err := mailstore.SetEffectiveMode(context.WithoutCancel(ctx), wt.opts.Pool, wt.key, f.alias, mode)
	if err != nil {
		wt.logger.WarnContext(ctx, "could not record the folder's effective mode", slog.String("alias", f.alias), slog.String("error", err.Error()))
		return false
	}
	if changed {
		wt.logger.InfoContext(ctx, "folder is now synchronized in "+strings.ToLower(mode)+" mode", slog.String("alias", f.alias), slog.String("mode", mode))
	}
	return changed
}
