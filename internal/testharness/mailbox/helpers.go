package mailbox

import (
	"fmt"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Helpers are the operations of an Owner for a test: each is the Owner
// method of its name, documented there, but fails the test on any error,
// naming the user and the step, and otherwise returns what the operation
// returns. They add no command and no retry of their own. A server
// harness's User embeds them and declares again, with its own
// documentation, those its server does differently.
//
// They report failures with t.Fatal, so they must be called from the
// test's goroutine.
type Helpers struct {
	t     testing.TB
	who   string // "dovecot: user alice", the start of every failure
	owner Owner
}

// NewHelpers returns the Helpers that run the operations through owner
// and fail t with messages that begin with who, such as
// "dovecot: user alice".
func NewHelpers(t testing.TB, who string, owner Owner) Helpers {
	return Helpers{t: t, who: who, owner: owner}
}

// Check fails the test if err is not nil, with a message naming the user
// and the step that format and args describe.
func (h Helpers) Check(err error, format string, args ...any) {
	h.t.Helper()
	if err != nil {
		h.t.Fatalf("%s: %s: %v", h.who, fmt.Sprintf(format, args...), err)
	}
}

// Append is Owner.Append: it returns the UID the server assigned to raw
// in folder (APPENDUID).
func (h Helpers) Append(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) imap.UID {
	h.t.Helper()
	uid, err := h.owner.Append(folder, raw, internalDate, flags...)
	h.Check(err, "append to %q", folder)
	return uid
}

// SetFlags is Owner.SetFlags: it adds the flags add and then removes the
// flags remove on message uid in folder.
func (h Helpers) SetFlags(folder string, uid imap.UID, add, remove []imap.Flag) {
	h.t.Helper()
	h.Check(h.owner.SetFlags(folder, uid, add, remove), "set flags of UID %d in %q", uid, folder)
}

// Expunge is Owner.Expunge: it expunges exactly the messages uids in
// folder.
func (h Helpers) Expunge(folder string, uids ...imap.UID) {
	h.t.Helper()
	h.Check(h.owner.Expunge(folder, uids...), "expunge %v from %q", uids, folder)
}

// CreateFolder is Owner.CreateFolder: it creates folder, and any missing
// parents, with a new UIDVALIDITY.
func (h Helpers) CreateFolder(folder string) {
	h.t.Helper()
	h.Check(h.owner.CreateFolder(folder), "create %q", folder)
}

// DeleteFolder is Owner.DeleteFolder: it deletes folder.
func (h Helpers) DeleteFolder(folder string) {
	h.t.Helper()
	h.Check(h.owner.DeleteFolder(folder), "delete %q", folder)
}

// RecreateFolder is Owner.RecreateFolder: it deletes folder and creates
// it again, empty, and returns its new UIDVALIDITY.
func (h Helpers) RecreateFolder(folder string) uint32 {
	h.t.Helper()
	uidValidity, err := h.owner.RecreateFolder(folder)
	h.Check(err, "recreate %q", folder)
	return uidValidity
}

// UIDValidity is Owner.UIDValidity: folder's UIDVALIDITY (STATUS).
func (h Helpers) UIDValidity(folder string) uint32 {
	h.t.Helper()
	uidValidity, err := h.owner.UIDValidity(folder)
	h.Check(err, "status %q", folder)
	return uidValidity
}

// UIDNext is Owner.UIDNext: folder's UIDNEXT (STATUS).
func (h Helpers) UIDNext(folder string) imap.UID {
	h.t.Helper()
	uidNext, err := h.owner.UIDNext(folder)
	h.Check(err, "status %q", folder)
	return uidNext
}

// HighestModSeq is Owner.HighestModSeq: folder's HIGHESTMODSEQ (STATUS).
func (h Helpers) HighestModSeq(folder string) uint64 {
	h.t.Helper()
	modSeq, err := h.owner.HighestModSeq(folder)
	h.Check(err, "status %q", folder)
	return modSeq
}

// UIDs is Owner.UIDs: the UIDs of all messages in folder, ascending.
func (h Helpers) UIDs(folder string) []imap.UID {
	h.t.Helper()
	uids, err := h.owner.UIDs(folder)
	h.Check(err, "list UIDs of %q", folder)
	return uids
}

// Flags is Owner.Flags: the flags message uid in folder has on the
// server, without \Recent, read so that reading changes nothing.
func (h Helpers) Flags(folder string, uid imap.UID) []imap.Flag {
	h.t.Helper()
	flags, err := h.owner.Flags(folder, uid)
	h.Check(err, "read flags of UID %d in %q", uid, folder)
	return flags
}

// Message is Owner.Message: message uid in folder as the server holds
// it, read with BODY.PEEK[] so \Seen is not set.
func (h Helpers) Message(folder string, uid imap.UID) *imapclient.FetchMessageBuffer {
	h.t.Helper()
	msg, err := h.owner.Message(folder, uid)
	h.Check(err, "fetch UID %d in %q", uid, folder)
	return msg
}
