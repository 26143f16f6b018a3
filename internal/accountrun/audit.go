package accountrun

import (
	"context"
	"log/slog"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// audit is one binding change, logged after the transaction that made it
// committed.
type audit struct {
	change   mailstore.BindingChange
	binding  mailstore.Binding
	previous *mailstore.Binding
}

// logMappingChange writes the mapping audit record: the one log line that
// names remote folder paths. A first binding is information; a repointed
// alias is a warning, because mail is now read from another folder.
func logMappingChange(ctx context.Context, logger *slog.Logger, a audit) {
	attrs := []any{
		slog.String("alias", a.binding.Alias),
		slog.Int("generation", a.binding.Generation),
		slog.String("remote_path", a.binding.RemotePath),
	}
	if a.change == mailstore.BindingRepointed && a.previous != nil {
		attrs = append(attrs, slog.String("previous_remote_path", a.previous.RemotePath),
			slog.Int("previous_generation", a.previous.Generation))
		logger.WarnContext(ctx, "folder alias repointed to another remote folder; a new generation starts from its first UID", attrs...)
		return
	}
	logger.InfoContext(ctx, "folder alias bound", attrs...)
}
