package accountrun

import (
	"context"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/folders"
)

// Session is the part of a read-only IMAP session the run lists the
// account's folders over; *mailsession.Session implements it, running the
// listing under the account's resilience pipelines.
type Session interface {
	ListFolders(ctx context.Context) ([]imapx.Folder, error)
	Close() error
}

// discover lists the account's folders over one read-only session and
// resolves every configured alias. With opts.Keep it returns the session
// still open, otherwise closed (nil).
func discover(ctx context.Context, opts Options) ([]folders.Resolution, Session, error) {
	sess, err := opts.Open(ctx)
	if err != nil {
		return nil, nil, err
	}
	listing, err := sess.ListFolders(ctx)
	if err != nil || opts.Keep == nil {
		// The listing is complete (or failed): a failed logout changes
		// nothing.
		_ = sess.Close()
		sess = nil
	}
	if err != nil {
		return nil, nil, err
	}
	catalog := make([]folders.Remote, len(listing))
	for i, f := range listing {
		catalog[i] = folders.Remote{Path: f.Path, Delimiter: f.Delimiter, Attributes: f.Attributes}
	}
	account := opts.Account
	mappings := make([]folders.Mapping, len(account.Folders))
	for i, f := range account.Folders {
		mappings[i] = folders.Mapping{Alias: f.Alias, RemotePath: f.RemotePath, SpecialUse: string(f.SpecialUse)}
	}
	return folders.Resolve(mappings, catalog), sess, nil
}
