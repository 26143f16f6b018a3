package cyrus

import (
	"fmt"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/internal/testharness/mailbox"
)

// The helpers below change or read a user's mail through the user's helper
// session with the operations of package mailbox, failing the test on any
// error. Mailbox-scoped ones SELECT (or, when they only read, EXAMINE) the
// folder and UNSELECT it afterwards, so the helper session never stays in
// a mailbox between calls. Cyrus reports the per-session \Recent flag in
// FLAGS; Flags and Message leave it out.

// owner is how the helpers reach u's mailbox: its helper session.
func (u *User) owner() mailbox.Owner { return u.withHelper }

func (u *User) check(err error, format string, args ...any) {
	u.t.Helper()
	if err != nil {
		u.t.Fatalf("cyrus: user %s: %s: %v", u.name, fmt.Sprintf(format, args...), err)
	}
}

// Append appends raw to folder with the given INTERNALDATE (the zero time
// means the server's clock) and flags, and returns the UID the server
// assigned (APPENDUID). Cyrus refuses messages Dovecot stores (see the
// package documentation): bare LF line endings, a header line without a
// colon, NUL bytes; the test then fails with the server's reason.
func (u *User) Append(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) imap.UID {
	u.t.Helper()
	uid, err := u.TryAppend(folder, raw, internalDate, flags...)
	u.check(err, "append to %q", folder)
	return uid
}

// TryAppend is Append returning the server's refusal, an *imap.Error,
// instead of failing the test, for tests of what Cyrus refuses.
func (u *User) TryAppend(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) (imap.UID, error) {
	return u.owner().Append(folder, raw, internalDate, flags...)
}

// SetFlags adds the flags add and then removes the flags remove on message
// uid in folder (UID STORE +FLAGS.SILENT / -FLAGS.SILENT). Either may be
// empty.
func (u *User) SetFlags(folder string, uid imap.UID, add, remove []imap.Flag) {
	u.t.Helper()
	u.check(u.owner().SetFlags(folder, uid, add, remove), "set flags of UID %d in %q", uid, folder)
}

// Expunge marks the messages uids in folder \Deleted and expunges exactly
// those (UID EXPUNGE), leaving other \Deleted messages alone.
func (u *User) Expunge(folder string, uids ...imap.UID) {
	u.t.Helper()
	u.check(u.owner().Expunge(folder, uids...), "expunge %v from %q", uids, folder)
}

// CreateFolder creates folder, and any missing parents, with a new
// UIDVALIDITY.
func (u *User) CreateFolder(folder string) {
	u.t.Helper()
	u.check(u.owner().CreateFolder(folder), "create %q", folder)
}

// DeleteFolder deletes folder. Cyrus refuses to delete INBOX and, by its
// default specialuse_protect, the special-use folders.
func (u *User) DeleteFolder(folder string) {
	u.t.Helper()
	u.check(u.TryDeleteFolder(folder), "delete %q", folder)
}

// TryDeleteFolder is DeleteFolder returning the server's refusal instead
// of failing the test.
func (u *User) TryDeleteFolder(folder string) error {
	return u.owner().DeleteFolder(folder)
}

// RecreateFolder deletes folder and creates it again, empty, and returns
// its new UIDVALIDITY, which differs from the old one (the test fails
// otherwise). It does not work for INBOX or a special-use folder (see
// DeleteFolder).
func (u *User) RecreateFolder(folder string) uint32 {
	u.t.Helper()
	uidValidity, err := u.owner().RecreateFolder(folder)
	u.check(err, "recreate %q", folder)
	return uidValidity
}

// UIDValidity returns folder's UIDVALIDITY (STATUS).
func (u *User) UIDValidity(folder string) uint32 {
	u.t.Helper()
	uidValidity, err := u.owner().UIDValidity(folder)
	u.check(err, "status %q", folder)
	return uidValidity
}

// UIDNext returns folder's UIDNEXT (STATUS).
func (u *User) UIDNext(folder string) imap.UID {
	u.t.Helper()
	uidNext, err := u.owner().UIDNext(folder)
	u.check(err, "status %q", folder)
	return uidNext
}

// HighestModSeq returns folder's HIGHESTMODSEQ (STATUS).
func (u *User) HighestModSeq(folder string) uint64 {
	u.t.Helper()
	modSeq, err := u.owner().HighestModSeq(folder)
	u.check(err, "status %q", folder)
	return modSeq
}

// UIDs returns the UIDs of all messages in folder, ascending (EXAMINE, UID
// SEARCH ALL).
func (u *User) UIDs(folder string) []imap.UID {
	u.t.Helper()
	uids, err := u.owner().UIDs(folder)
	u.check(err, "list UIDs of %q", folder)
	return uids
}

// Flags returns the flags message uid in folder has on the server, read
// with EXAMINE and UID FETCH FLAGS so that reading changes nothing. The
// per-session \Recent flag is left out. It fails the test if there is no
// such message.
func (u *User) Flags(folder string, uid imap.UID) []imap.Flag {
	u.t.Helper()
	flags, err := u.owner().Flags(folder, uid)
	u.check(err, "read flags of UID %d in %q", uid, folder)
	return flags
}

// Message returns message uid in folder as the server holds it: UID,
// flags (without \Recent), INTERNALDATE, RFC822.SIZE, envelope and the full
// raw message, fetched with BODY.PEEK[] so \Seen is not set.
func (u *User) Message(folder string, uid imap.UID) *imapclient.FetchMessageBuffer {
	u.t.Helper()
	msg, err := u.owner().Message(folder, uid)
	u.check(err, "fetch UID %d in %q", uid, folder)
	return msg
}
