package mailbox

import (
	"fmt"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Owner reaches a mailbox as its owner: it runs f with a client that is
// authenticated as the owner and has no mailbox selected, and returns f's
// error or why it could not run f. Session.Do, with the session's dial,
// is one.
//
// Precondition: the Owner runs one f at a time on a client, since the
// operations expect no other command on it meanwhile.
type Owner func(f func(c *imapclient.Client) error) error

// Select runs f with folder selected (SELECT) and unselects it afterwards.
func (o Owner) Select(folder string, f func(c *imapclient.Client) error) error {
	return o.in(folder, false, f)
}

// Examine runs f with folder selected read-only (EXAMINE), so that f's
// reads set no \Seen, and unselects it afterwards.
func (o Owner) Examine(folder string, f func(c *imapclient.Client) error) error {
	return o.in(folder, true, f)
}

func (o Owner) in(folder string, readOnly bool, f func(c *imapclient.Client) error) error {
	return o(func(c *imapclient.Client) error {
		if _, err := c.Select(folder, &imap.SelectOptions{ReadOnly: readOnly}).Wait(); err != nil {
			return fmt.Errorf("select %q: %w", folder, err)
		}
		err := f(c)
		if uerr := c.Unselect().Wait(); err == nil && uerr != nil {
			err = fmt.Errorf("unselect: %w", uerr)
		}
		return err
	})
}
