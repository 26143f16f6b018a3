package push

import (
	"context"
	"time"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// boundFolders returns the account's bound folders, waiting a little for
// the account's first run to bind them: a watch inserted as the process
// starts usually runs before that run has committed its bindings. It
// never binds a folder itself; after about thirty seconds it returns none.
func (wt *watch) boundFolders(ctx context.Context) ([]watchedFolder, error) {
	for wait := 0; ; wait++ {
		folders, err := wt.folders(ctx)
		if err != nil || len(folders) > 0 || wait >= 60 {
			return folders, err
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return nil, err
		}
	}
}

// folders returns the account's bound folders in configuration order: the
// latest binding of each configured alias that has one.
func (wt *watch) folders(ctx context.Context) ([]watchedFolder, error) {
	id, err := mailstore.EnsureAccount(ctx, wt.opts.Pool, wt.key)
	if err != nil {
		return nil, err
	}
	aliases := make([]string, len(wt.account.Folders))
	for i, f := range wt.account.Folders {
		aliases[i] = f.Alias
	}
	// One read: a run that binds several folders at once is seen whole,
	// never with some of them, which would leave the others unwatched
	// until the watch re-arms.
	bound, err := mailstore.LatestBindings(ctx, wt.opts.Pool, id, aliases)
	if err != nil {
		return nil, err
	}
	var out []watchedFolder
	for _, alias := range aliases {
		if b, ok := bound[alias]; ok {
			out = append(out, watchedFolder{alias: b.Alias, path: b.RemotePath})
		}
	}
	return out, nil
}
