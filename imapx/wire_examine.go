package imapx

import (
	"context"
	"fmt"
	"time"
)

// wireFolder is what EXAMINE reported on the reconciliation connection.
type wireFolder struct {
	uidValidity uint32
	uidNext     uint32
	exists      uint32
	// highestModSeq is 0 when the server reported none.
	highestModSeq uint64
	// noModSeq is the server saying the folder keeps no modification
	// sequences (RFC 7162 §3.1.2.2).
	noModSeq bool
}

// examine opens path read-only with EXAMINE (RFC 3501 §6.3.2), which never
// changes the folder or its flags, not even \Recent. With condstore the
// CONDSTORE parameter (RFC 7162 §3.1.8) asks for the folder's
// HIGHESTMODSEQ (§3.1.2.1) or NOMODSEQ (§3.1.2.2); once QRESYNC is
// enabled the server reports them without it, since enabling QRESYNC
// enables CONDSTORE too (§3.2.3).
//
// A folder that does not exist is a *CommandError; the connection then has
// no folder open.
func (w *wireConn) examine(ctx context.Context, timeout time.Duration, path string, condstore bool) (wireFolder, error) {
	name, err := encodeMailbox(path)
	if err != nil {
		return wireFolder{}, err
	}
	args := quote(name)
	if condstore {
		args += " (CONDSTORE)"
	}
	w.folder = ""
	var st wireFolder
	err = w.run(ctx, timeout, "EXAMINE", args, func(r *response) {
		switch r.kind {
		case respExists:
			st.exists = r.num
		case respStatus:
			switch r.code {
			case "UIDVALIDITY":
				st.uidValidity = r.uidValidity
			case "UIDNEXT":
				st.uidNext = r.uidNext
			case "HIGHESTMODSEQ":
				st.highestModSeq = r.highestModSeq
			case "NOMODSEQ":
				st.noModSeq = true
			}
		}
	})
	if err != nil {
		return wireFolder{}, err
	}
	if st.uidValidity == 0 {
		return wireFolder{}, fmt.Errorf("imapx: EXAMINE reported no UIDVALIDITY: %w", ErrProtocolViolation)
	}
	w.folder = path
	return st, nil
}
