package push

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"time"

	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// watchedFolder is one folder the account's latest run resolved: its
// alias, the binding it was resolved to and that binding's remote path.
type watchedFolder struct {
	alias, path string
	bindingID   int64
}

// unresolvedAlias is a configured alias the latest run resolved to no
// folder, with the identity of why.
type unresolvedAlias struct {
	alias, failure string
}

// folderSet is what the account's latest run resolved of its configured
// aliases, in configuration order.
type folderSet struct {
	// version is the account's resolutions version; 0 before any run
	// recorded its resolutions.
	version    int64
	watched    []watchedFolder
	unresolved []unresolvedAlias
}

// boundFolders returns the folders the account's latest run resolved,
// waiting a little for the account's first run: a watch inserted as the
// process starts usually runs before that run has committed. It never
// resolves a folder itself; after about thirty seconds it returns a set of
// version 0.
func (wt *watch) boundFolders(ctx context.Context) (folderSet, error) {
	for wait := 0; ; wait++ {
		set, err := wt.folders(ctx)
		if err != nil || set.version > 0 || wait >= 60 {
			return set, err
		}
		if err := sleep(ctx, 500*time.Millisecond); err != nil {
			return folderSet{}, err
		}
	}
}

// folders reads what the account's latest run resolved, in one statement:
// a run that resolves several folders at once is seen whole, never with
// some of them, which would leave the others unwatched. A folder the
// latest run did not resolve — deleted on the server, say — is not
// watched, even though an earlier binding of its alias remains.
func (wt *watch) folders(ctx context.Context) (folderSet, error) {
	aliases := make([]string, len(wt.account.Folders))
	for i, f := range wt.account.Folders {
		aliases[i] = f.Alias
	}
	res, err := mailstore.ReadResolvedFolders(ctx, wt.opts.Pool, wt.key, aliases)
	if err != nil {
		return folderSet{}, err
	}
	set := folderSet{version: res.Version}
	for _, alias := range aliases {
		if b, ok := res.Bindings[alias]; ok {
			set.watched = append(set.watched, watchedFolder{alias: b.Alias, path: b.RemotePath, bindingID: b.ID})
		} else if why, ok := res.Unresolved[alias]; ok {
			set.unresolved = append(set.unresolved, unresolvedAlias{alias: alias, failure: why})
		}
	}
	return set, nil
}

// noteUnresolved records every alias the latest run resolved to no folder
// as polled — nothing watches it, and nothing synchronizes it until a run
// resolves it — and says why once per attempt and reason.
func (wt *watch) noteUnresolved(ctx context.Context, set folderSet) {
	now := make(map[string]string, len(set.unresolved))
	for _, u := range set.unresolved {
		now[u.alias] = u.failure
		wt.setMode(ctx, watchedFolder{alias: u.alias}, mailstore.ModePolling)
		if wt.unresolved[u.alias] != u.failure {
			wt.logger.InfoContext(ctx, "folder is not watched: the account's latest run resolved its alias to no folder",
				slog.String("alias", u.alias), slog.String("failure", u.failure))
		}
	}
	wt.unresolved = now
}

// errFoldersChanged ends a subscription's wait when the account's latest
// run resolved other folders than the subscription names.
var errFoldersChanged = errors.New("the account's resolved folders changed")

// untilFoldersChange returns a context derived from ctx that ends, with
// the cause errFoldersChanged, once the account's latest run resolved
// other folders to watch than current; stop releases it. The folders are
// read again only when the account's resolutions version moved
// (Resolutions), so a quiet account costs nothing.
func (wt *watch) untilFoldersChange(ctx context.Context, current folderSet) (context.Context, func()) {
	wctx, cancel := context.WithCancelCause(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-wctx.Done():
				return
			case <-wt.changes:
			}
			set, err := wt.folders(wctx)
			if err == nil && !slices.Equal(set.watched, current.watched) {
				cancel(errFoldersChanged)
				return
			}
		}
	}()
	return wctx, func() {
		cancel(nil)
		<-done
	}
}
