package wire

import (
	"context"
	"strings"
	"time"
)

// notifyEvents are the message events (RFC 5465 §5.2, §5.3) a watching
// connection asks for, for the selected folder and for every other folder
// it names. MessageNew carries no fetch-att, so the server reports a new
// message as EXISTS in the selected folder and as a STATUS response
// elsewhere, never with message data; MessageNew and MessageExpunge go
// together, as §5 requires, and FlagChange needs them both.
const notifyEvents = "(MessageNew MessageExpunge FlagChange)"

// NotifySet subscribes the connection with NOTIFY SET (RFC 5465 §3.1) to
// changes in the folder it has open (the "selected" filter, §6) and in
// others, the folder paths as ListFolders reports them (the "mailboxes"
// filter). It asks for no STATUS indicator, so the server reports nothing
// until something changes, and no message data: a report only ever says
// which folder changed (see Change).
//
// A folder must be open (Examine); others may be empty. A server that
// declines the subscription — it cannot watch that many folders, or not
// these events (NOTIFICATIONOVERFLOW, BADEVENT, §5.7, §5.8) — answers NO
// or BAD, a *CommandError that leaves the connection usable.
//
// NotifySet does not check that the server advertised NOTIFY; the caller
// decides that from Caps.
func (c *Conn) NotifySet(ctx context.Context, timeout time.Duration, others []string) error {
	if c.folder == "" {
		return ErrNoFolder
	}
	var b strings.Builder
	b.WriteString("SET (selected ")
	b.WriteString(notifyEvents)
	b.WriteString(")")
	if len(others) > 0 {
		b.WriteString(" (mailboxes (")
		for i, p := range others {
			name, err := encodeMailbox(p)
			if err != nil {
				return err
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(quote(name))
		}
		b.WriteString(") ")
		b.WriteString(notifyEvents)
		b.WriteString(")")
	}
	return c.run(ctx, timeout, "NOTIFY", b.String(), nil)
}
