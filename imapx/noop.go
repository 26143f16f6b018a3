package imapx

import (
	"context"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

// noopTimeout bounds the wait for a NOOP's answer, which a server gives at
// once: a connection that takes longer is replaced rather than waited for.
const noopTimeout = 10 * time.Second

// Noop asks the server whether it still answers on this connection (NOOP,
// RFC 3501 §6.1.2), which changes nothing in the mailbox. It is how a
// connection that sat idle is checked before a change is issued over it:
// one that went away without a word (a dropped NAT mapping, a server host
// that died) fails here, within the shorter of the command timeout and
// ten seconds, instead of swallowing the change's command.
//
// A failure leaves the connection unusable (a *TransportError, or the
// caller's context error) unless the server answered NO or BAD (a
// *CommandError). Untagged updates the server sends with its answer are
// read by go-imap as ever and change nothing here.
func (w *WriteConnection) Noop(ctx context.Context) error {
	return w.runWithin(ctx, "NOOP", min(w.opts.commandTimeout(), noopTimeout), func(c *imapclient.Client) error {
		return c.Noop().Wait()
	})
}
