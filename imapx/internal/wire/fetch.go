package wire

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// FetchItem is the name of a FETCH data item (RFC 3501 §6.4.5).
type FetchItem string

// The data items UIDFetchFlags may ask for.
const (
	FetchFlags FetchItem = "FLAGS"
	FetchUID   FetchItem = "UID"
	// FetchModSeq is the message's mod-sequence (RFC 7162 §3.1.4).
	FetchModSeq FetchItem = "MODSEQ"
	// FetchEmailID and FetchThreadID are the server's identity of the
	// message and of its thread (RFC 8474 §5.1, §5.2; OBJECTID).
	FetchEmailID  FetchItem = "EMAILID"
	FetchThreadID FetchItem = "THREADID"
	// FetchGmailMsgID, FetchGmailThrID and FetchGmailLabels are Gmail's
	// message identity, thread identity and labels (X-GM-EXT-1).
	FetchGmailMsgID  FetchItem = "X-GM-MSGID"
	FetchGmailThrID  FetchItem = "X-GM-THRID"
	FetchGmailLabels FetchItem = "X-GM-LABELS"
)

// flagsFetchItems are the only FETCH data items UIDFetchFlags may ask
// for. Each is answered from folder state (identities and labels too), so none can
// set \Seen (RFC 3501 §6.4.5: only BODY[...] without .PEEK and RFC822,
// RFC822.TEXT set it); a request naming anything else is refused before it
// is sent.
var flagsFetchItems = map[FetchItem]bool{
	FetchFlags: true, FetchUID: true, FetchModSeq: true,
	FetchEmailID: true, FetchThreadID: true,
	FetchGmailMsgID: true, FetchGmailThrID: true, FetchGmailLabels: true,
}

// FlagsFetch is the question of one UIDFetchFlags.
type FlagsFetch struct {
	Set   string // a sequence-set of UIDs without "*", or WholeFolder
	Items []FetchItem
	// ChangedSince, when not zero, adds the CHANGEDSINCE modifier (RFC 7162
	// §3.1.4.1): only messages whose mod-sequence is higher are described.
	ChangedSince uint64
	// Vanished adds the VANISHED modifier (RFC 7162 §3.2.6), valid only
	// with CHANGEDSINCE and only once QRESYNC is enabled: the server
	// reports the UIDs of the set that were expunged as VANISHED (EARLIER).
	Vanished bool
}

var errFetchRequest = errors.New("imapx: invalid reconciliation fetch")

// args returns the arguments of UID FETCH (RFC 3501 §6.4.8 and §6.4.5,
// fetch modifiers as in RFC 4466 §2.4):
// "<set> (FLAGS UID [MODSEQ]) [(CHANGEDSINCE <n> [VANISHED])]".
func (q FlagsFetch) args() (string, error) {
	if !validSet(q.Set) || len(q.Items) == 0 {
		return "", errFetchRequest
	}
	if q.Vanished && q.ChangedSince == 0 {
		return "", errFetchRequest
	}
	var b strings.Builder
	b.WriteString(q.Set)
	b.WriteString(" (")
	for i, it := range q.Items {
		if !flagsFetchItems[it] {
			return "", errFetchRequest
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(it))
	}
	b.WriteByte(')')
	if q.ChangedSince > 0 {
		b.WriteString(" (CHANGEDSINCE ")
		b.WriteString(strconv.FormatUint(q.ChangedSince, 10))
		if q.Vanished {
			b.WriteString(" VANISHED")
		}
		b.WriteByte(')')
	}
	return b.String(), nil
}

// UIDFetchFlags runs one UID FETCH of flags, UIDs, mod-sequences,
// server identities and labels in the
// open folder (RFC 3501 §6.4.8), handing every untagged response to handle:
// the FETCH responses (RespFetch), and with q.Vanished the VANISHED
// (EARLIER) report (RespVanished), as well as whatever the server sends
// unsolicited. A UID of the set the folder no longer holds is ignored by
// the server rather than failing the command.
//
// It fetches no message content: a request naming an item other than
// FetchFlags, FetchUID, FetchModSeq, the identities and X-GM-LABELS, a set with "*" other than
// WholeFolder, or VANISHED without
// CHANGEDSINCE is refused before anything is sent, and without an open
// folder it is ErrNoFolder.
func (c *Conn) UIDFetchFlags(ctx context.Context, timeout time.Duration, q FlagsFetch, handle Handler) error {
	args, err := q.args()
	if err != nil {
		return err
	}
	if c.folder == "" {
		return ErrNoFolder
	}
	return c.run(ctx, timeout, "UID FETCH", args, handle)
}
