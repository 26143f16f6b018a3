package imapx

import (
	"context"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Copy copies the message uid of the selected folder to dest with
// UID COPY (RFC 3501 §6.4.7), the first step of a relocation without MOVE
// and the whole of a copy. A server with UIDPLUS answers with COPYUID (RFC
// 4315 §3), returned as the Placement; without it the Placement is zero.
//
// Failures are Move's: ErrDestinationMissing, a *CommandError, a
// *PlacementUnknownError when the command was written and its answer never
// read, after which it must not be issued again (a second COPY is a second
// message), or an *UnsentError when none of it was written.
func (w *WriteConnection) Copy(ctx context.Context, uid uint32, dest string) (Placement, error) {
	if err := w.selected(); err != nil {
		return Placement{}, err
	}
	var data *imap.CopyData
	err := w.run(ctx, "UID COPY", func(c *imapclient.Client) error {
		var err error
		data, err = c.Copy(imap.UIDSetNum(imap.UID(uid)), dest).Wait()
		return err
	})
	if err != nil {
		return Placement{}, placementError("UID COPY", err)
	}
	if data.DestUIDs == nil {
		return Placement{}, nil
	}
	return placementOf(uid, data.UIDValidity, data.DestUIDs), nil
}
