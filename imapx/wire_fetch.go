package imapx

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"time"
)

// wireFetchItems are the only FETCH data items the reconciliation
// connection may ask for. Each is answered from folder state, so none can
// set \Seen (RFC 3501 §6.4.5: only BODY[...] without .PEEK and RFC822,
// RFC822.TEXT set it); a request naming anything else is refused before it
// is sent.
var wireFetchItems = map[FetchItem]bool{FetchFlags: true, FetchUID: true, FetchModSeq: true}

// fetchRequest is one UID FETCH of the reconciliation connection.
type fetchRequest struct {
	set   string // a sequence-set of UIDs, without "*"
	items []FetchItem
	// changedSince, when not zero, adds the CHANGEDSINCE modifier (RFC 7162
	// §3.1.4.1): only messages whose mod-sequence is higher are described.
	changedSince uint64
	// vanished adds the VANISHED modifier (RFC 7162 §3.2.6), valid only
	// with CHANGEDSINCE and only once QRESYNC is enabled: the server
	// reports the UIDs of the set that were expunged as VANISHED (EARLIER).
	vanished bool
}

var errFetchRequest = errors.New("imapx: invalid reconciliation fetch")

// args returns the arguments of UID FETCH (RFC 3501 §6.4.8 and §6.4.5,
// fetch modifiers as in RFC 4466 §2.4):
// "<set> (FLAGS UID [MODSEQ]) [(CHANGEDSINCE <n> [VANISHED])]".
func (q fetchRequest) args() (string, error) {
	if q.set == "" || strings.Trim(q.set, "0123456789:,") != "" || len(q.items) == 0 {
		return "", errFetchRequest
	}
	if q.vanished && q.changedSince == 0 {
		return "", errFetchRequest
	}
	var b strings.Builder
	b.WriteString(q.set)
	b.WriteString(" (")
	for i, it := range q.items {
		if !wireFetchItems[it] {
			return "", errFetchRequest
		}
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(string(it))
	}
	b.WriteByte(')')
	if q.changedSince > 0 {
		b.WriteString(" (CHANGEDSINCE ")
		b.WriteString(strconv.FormatUint(q.changedSince, 10))
		if q.vanished {
			b.WriteString(" VANISHED")
		}
		b.WriteByte(')')
	}
	return b.String(), nil
}

// uidFetch runs one UID FETCH in the open folder, handing every untagged
// response to handle. A UID of the set the folder no longer holds is
// ignored by the server rather than failing the command (RFC 3501 §6.4.8).
func (w *wireConn) uidFetch(ctx context.Context, timeout time.Duration, q fetchRequest, handle wireHandler) error {
	args, err := q.args()
	if err != nil {
		return err
	}
	if w.folder == "" {
		return ErrNoFolder
	}
	return w.run(ctx, timeout, "UID FETCH", args, handle)
}
