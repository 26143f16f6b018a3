package imapx

import (
	"context"
	"fmt"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Select opens path read-write (SELECT, RFC 3501 §6.3.1) on the write
// connection, unless it is already the selected folder, and returns its
// UIDVALIDITY. A change is only ever made in the UID space it was
// recorded in: the caller compares the UIDVALIDITY before issuing
// anything.
func (w *WriteConnection) Select(ctx context.Context, path string) (uint32, error) {
	if w.folder == path && w.uidValidity != 0 && w.Usable() {
		return w.uidValidity, nil
	}
	w.folder, w.uidValidity = "", 0
	var data *imap.SelectData
	err := w.run(ctx, "read-write SELECT", func(c *imapclient.Client) error {
		var err error
		data, err = c.Select(path, nil).Wait()
		return err
	})
	if err != nil {
		return 0, err
	}
	if data.UIDValidity == 0 {
		return 0, fmt.Errorf("imapx: SELECT reported no UIDVALIDITY: %w", ErrProtocolViolation)
	}
	w.folder, w.uidValidity = path, data.UIDValidity
	return data.UIDValidity, nil
}

func (w *WriteConnection) selected() error {
	if w.folder == "" {
		return ErrNoFolder
	}
	return nil
}
