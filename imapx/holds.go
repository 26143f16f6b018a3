package imapx

import (
	"context"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Holds reports whether the selected folder holds the message uid, with
// UID SEARCH UID <uid> (RFC 3501 §6.4.4), which reads identifiers and
// changes nothing. A relocation or copy asks it before its placement is
// issued: a server answers a UID MOVE or COPY of a UID the folder no
// longer holds with a plain OK, as if something had been placed, so the
// answer alone cannot tell a message placed without a COPYUID from one
// that was already gone.
//
// Failures are the write connection's: a *CommandError, a
// *TransportError, an *UnsentError.
func (w *WriteConnection) Holds(ctx context.Context, uid uint32) (bool, error) {
	if err := w.selected(); err != nil {
		return false, err
	}
	var found bool
	err := w.run(ctx, "UID SEARCH", func(c *imapclient.Client) error {
		data, err := c.UIDSearch(&imap.SearchCriteria{UID: []imap.UIDSet{imap.UIDSetNum(imap.UID(uid))}}, nil).Wait()
		if err != nil {
			return err
		}
		for _, u := range data.AllUIDs() {
			found = found || uint32(u) == uid
		}
		return nil
	})
	return found, err
}
