package imapx

import (
	"context"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// StoreFlag adds (set true) or removes one flag of the message uid of the
// selected folder with UID STORE +FLAGS.SILENT or -FLAGS.SILENT (RFC 3501
// §6.4.6). It is idempotent on the wire, so repeating it after a lost
// answer is safe. Only \Seen and \Deleted are accepted.
func (w *WriteConnection) StoreFlag(ctx context.Context, uid uint32, flag string, set bool) error {
	if err := w.selected(); err != nil {
		return err
	}
	if flag != string(imap.FlagSeen) && flag != string(imap.FlagDeleted) {
		return errUnsupportedFlag
	}
	op := imap.StoreFlagsDel
	if set {
		op = imap.StoreFlagsAdd
	}
	return w.run(ctx, "UID STORE", func(c *imapclient.Client) error {
		return c.Store(imap.UIDSetNum(imap.UID(uid)), &imap.StoreFlags{
			Op: op, Silent: true, Flags: []imap.Flag{imap.Flag(flag)},
		}, nil).Close()
	})
}
