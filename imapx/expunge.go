package imapx

import (
	"context"
	"errors"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

var errUnsupportedFlag = errors.New("imapx: only \\Seen and \\Deleted are stored")

// ExpungeUID removes the message uid of the selected folder, which must
// already carry \Deleted, with UID EXPUNGE (RFC 4315 §2.1): only that UID
// is removed, never a message the owner flagged \Deleted themselves. It
// refuses with ErrNoSafeWay, sending nothing, when the server does not
// advertise UIDPLUS; there is no plain EXPUNGE to fall back to.
func (w *WriteConnection) ExpungeUID(ctx context.Context, uid uint32) error {
	if err := w.selected(); err != nil {
		return err
	}
	if !w.CanExpungeUID() {
		return ErrNoSafeWay
	}
	return w.run(ctx, "UID EXPUNGE", func(c *imapclient.Client) error {
		return c.UIDExpunge(imap.UIDSetNum(imap.UID(uid))).Close()
	})
}
