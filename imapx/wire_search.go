package imapx

import (
	"context"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
)

// uidSearch runs UID SEARCH UID <set> in the open folder (RFC 3501 §6.4.4
// and §6.4.8), which answers with the UIDs of the set that still exist and
// no message data. When the server advertises ESEARCH it asks for
// RETURN (ALL) (RFC 4731 §3.1), whose answer is a compact sequence-set
// instead of one number per message. The answer reaches handle as a
// respSearch or respESearch response; a command that completes without one
// has left the question unanswered, which the caller checks.
func (w *wireConn) uidSearch(ctx context.Context, timeout time.Duration, set string, handle wireHandler) error {
	if set == "" || strings.Trim(set, "0123456789:,") != "" {
		return errFetchRequest
	}
	if w.folder == "" {
		return ErrNoFolder
	}
	args := "UID " + set
	if w.caps.Has(imap.CapESearch) {
		args = "RETURN (ALL) " + args
	}
	return w.run(ctx, timeout, "UID SEARCH", args, handle)
}
