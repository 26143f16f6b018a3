package mailbox

import (
	"fmt"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// CreateFolder creates folder (CREATE, RFC 3501 §6.3.3), which the server
// gives a new UIDVALIDITY.
func (o Owner) CreateFolder(folder string) error {
	return o(func(c *imapclient.Client) error { return c.Create(folder, nil).Wait() })
}

// DeleteFolder deletes folder (DELETE, RFC 3501 §6.3.4), returning the
// server's refusal as go-imap reports it.
func (o Owner) DeleteFolder(folder string) error {
	return o(func(c *imapclient.Client) error { return c.Delete(folder).Wait() })
}

// RenameFolder renames folder to newName (RENAME, RFC 3501 §6.3.5).
func (o Owner) RenameFolder(folder, newName string) error {
	return o(func(c *imapclient.Client) error { return c.Rename(folder, newName, nil).Wait() })
}

// RecreateFolder deletes folder and creates it again, empty, and returns
// its new UIDVALIDITY. It is an error if the server kept the old one. Its
// errors name the step that failed.
func (o Owner) RecreateFolder(folder string) (uint32, error) {
	old, err := o.UIDValidity(folder)
	if err != nil {
		return 0, fmt.Errorf("status: %w", err)
	}
	if err := o.DeleteFolder(folder); err != nil {
		return 0, fmt.Errorf("delete: %w", err)
	}
	if err := o.CreateFolder(folder); err != nil {
		return 0, fmt.Errorf("create: %w", err)
	}
	now, err := o.UIDValidity(folder)
	if err != nil {
		return 0, fmt.Errorf("status: %w", err)
	}
	if now == old {
		return 0, fmt.Errorf("kept UIDVALIDITY %d", old)
	}
	return now, nil
}

// UIDValidity returns folder's UIDVALIDITY (STATUS, RFC 3501 §6.3.10).
func (o Owner) UIDValidity(folder string) (uint32, error) {
	data, err := o.status(folder, &imap.StatusOptions{UIDValidity: true})
	if err != nil {
		return 0, err
	}
	return data.UIDValidity, nil
}

// UIDNext returns folder's UIDNEXT (STATUS).
func (o Owner) UIDNext(folder string) (imap.UID, error) {
	data, err := o.status(folder, &imap.StatusOptions{UIDNext: true})
	if err != nil {
		return 0, err
	}
	return data.UIDNext, nil
}

// HighestModSeq returns folder's HIGHESTMODSEQ (STATUS, RFC 7162 §3.1.7).
func (o Owner) HighestModSeq(folder string) (uint64, error) {
	data, err := o.status(folder, &imap.StatusOptions{HighestModSeq: true})
	if err != nil {
		return 0, err
	}
	return data.HighestModSeq, nil
}

// status returns what opts asks of folder (STATUS, which selects nothing).
func (o Owner) status(folder string, opts *imap.StatusOptions) (*imap.StatusData, error) {
	var data *imap.StatusData
	err := o(func(c *imapclient.Client) error {
		var err error
		data, err = c.Status(folder, opts).Wait()
		return err
	})
	return data, err
}
