package wire

import (
	"context"
	"fmt"
	"time"
)

// ExamineData is what EXAMINE reported about a folder.
type ExamineData struct {
	UIDValidity uint32
	UIDNext     uint32 // 0 when the server reported none
	Exists      uint32
	// HighestModSeq is 0 when the server reported none.
	HighestModSeq uint64
	// NoModSeq is the server saying the folder keeps no modification
	// sequences (RFC 7162 §3.1.2.2).
	NoModSeq bool
}

// Examine opens path read-only with EXAMINE (RFC 3501 §6.3.2), which never
// changes the folder or its flags, not even \Recent. With condstore the
// CONDSTORE parameter (RFC 7162 §3.1.8) asks for the folder's
// HIGHESTMODSEQ (§3.1.2.1) or NOMODSEQ (§3.1.2.2); once QRESYNC is
// enabled the server reports them without it, since enabling QRESYNC
// enables CONDSTORE too (§3.2.3).
//
// path is a folder path as LIST reports it once decoded; it is sent in
// modified UTF-7 (RFC 3501 §5.1.3). A folder that does not exist is a
// *CommandError, and a report without UIDVALIDITY ErrProtocolViolation; the
// connection then has no folder open. SELECT, which would open the folder
// read-write, is never sent.
func (c *Conn) Examine(ctx context.Context, timeout time.Duration, path string, condstore bool) (ExamineData, error) {
	name, err := encodeMailbox(path)
	if err != nil {
		return ExamineData{}, err
	}
	args := quote(name)
	if condstore {
		args += " (CONDSTORE)"
	}
	c.folder = ""
	var st ExamineData
	err = c.run(ctx, timeout, "EXAMINE", args, func(r *Response) {
		switch r.Kind {
		case RespExists:
			st.Exists = r.Num
		case RespStatus:
			switch r.Code {
			case "UIDVALIDITY":
				st.UIDValidity = r.UIDValidity
			case "UIDNEXT":
				st.UIDNext = r.UIDNext
			case "HIGHESTMODSEQ":
				st.HighestModSeq = r.HighestModSeq
			case "NOMODSEQ":
				st.NoModSeq = true
			}
		}
	})
	if err != nil {
		return ExamineData{}, err
	}
	if st.UIDValidity == 0 {
		return ExamineData{}, fmt.Errorf("imapx: EXAMINE reported no UIDVALIDITY: %w", ErrProtocolViolation)
	}
	c.folder = path
	return st, nil
}

// InFolder records that path is open on the connection: another client
// of the same stream examined it, and lent the stream to this Conn
// between two of its own commands (imapx's read session, for FETCH items
// go-imap cannot parse). Nothing is sent.
func (c *Conn) InFolder(path string) { c.folder = path }
