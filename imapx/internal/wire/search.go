package wire

import (
	"context"
	"time"

	"github.com/emersion/go-imap/v2"
)

// UIDSearch runs UID SEARCH UID <set> in the open folder (RFC 3501 §6.4.4
// and §6.4.8), which answers with the UIDs of the set that still exist and
// no message data. When the server advertises ESEARCH it asks for
// RETURN (ALL) (RFC 4731 §3.1), whose answer is a compact sequence-set
// instead of one number per message. The answer reaches handle as a
// RespSearch or RespESearch response; a command that completes without one
// has left the question unanswered, which the caller checks. An ESEARCH
// that answers another command (its correlator names another tag) does not
// reach handle.
//
// A set with "*" other than WholeFolder is refused before anything is sent, and without an open
// folder it is ErrNoFolder.
func (c *Conn) UIDSearch(ctx context.Context, timeout time.Duration, set string, handle Handler) error {
	if !validSet(set) {
		return errFetchRequest
	}
	if c.folder == "" {
		return ErrNoFolder
	}
	args := "UID " + set
	if c.caps.Has(imap.CapESearch) {
		args = "RETURN (ALL) " + args
	}
	return c.run(ctx, timeout, "UID SEARCH", args, handle)
}
