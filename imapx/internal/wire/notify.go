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
// filter). It asks for no message data: a report only ever says which
// folder changed (see Change).
//
// With status it sends the STATUS indicator (§3.1), for which the server
// describes each of others with a STATUS response before its tagged OK —
// Dovecot 2.3 with UIDVALIDITY, UIDNEXT, MESSAGES, UNSEEN and, since
// FlagChange is asked for, HIGHESTMODSEQ, and none for a folder that does
// not exist or the one that is open. NotifySet returns what those
// responses reported, by the path they named (INBOX in upper case), so a
// watch learns a folder's state without opening it; a folder the server
// did not describe is missing. Without status the server reports nothing
// until something changes, and the map is empty.
//
// A change in the open folder after Examine answered and before the
// subscription took hold is reported with NOTIFY's own answer (RFC 3501
// §7: EXISTS, EXPUNGE and FETCH go with any command's response), and then
// never again: NotifySet reports whether one came (selectedChanged), so
// the caller does not take the folder for what Examine said.
//
// A folder must be open (Examine); others may be empty. A server that
// declines the subscription — it cannot watch that many folders, or not
// these events (NOTIFICATIONOVERFLOW, BADEVENT, §5.7, §5.8) — answers NO
// or BAD, a *CommandError that leaves the connection usable.
//
// NotifySet does not check that the server advertised NOTIFY; the caller
// decides that from Caps.
func (c *Conn) NotifySet(ctx context.Context, timeout time.Duration, others []string, status bool) (described map[string]ExamineData, selectedChanged bool, err error) {
	if c.folder == "" {
		return nil, false, ErrNoFolder
	}
	var b strings.Builder
	b.WriteString("SET ")
	if status {
		b.WriteString("STATUS ")
	}
	b.WriteString("(selected ")
	b.WriteString(notifyEvents)
	b.WriteString(")")
	if len(others) > 0 {
		b.WriteString(" (mailboxes (")
		for i, p := range others {
			name, err := encodeMailbox(p)
			if err != nil {
				return nil, false, err
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
	described = map[string]ExamineData{}
	err = c.run(ctx, timeout, "NOTIFY", b.String(), func(r *Response) {
		switch r.Kind {
		case RespMailboxStatus:
			if status && r.Mailbox != "" {
				described[r.Mailbox] = ExamineData{
					UIDValidity: r.Items.UIDValidity, UIDNext: r.Items.UIDNext,
					Exists: r.Items.Messages, HighestModSeq: r.Items.HighestModSeq,
				}
			}
		case RespExists, RespExpunge, RespFetch, RespVanished:
			selectedChanged = true
		}
	})
	if err != nil {
		return nil, false, err
	}
	return described, selectedChanged, nil
}
