package cyrus

import (
	"time"

	"github.com/emersion/go-imap/v2"
)

// The helpers a User has from mailbox.Helpers change or read its mail
// through its helper session, failing the test on any error.
// Mailbox-scoped ones SELECT (or, when they only read, EXAMINE) the folder
// and UNSELECT it afterwards, so the helper session never stays in a
// mailbox between calls. Cyrus reports the per-session \Recent flag in
// FLAGS; Flags and Message leave it out. Below are those Cyrus treats
// differently, with the Try forms of two of them.

// Append appends raw to folder with the given INTERNALDATE (the zero time
// means the server's clock) and flags, and returns the UID the server
// assigned (APPENDUID). Cyrus refuses messages Dovecot stores (see the
// package documentation): bare LF line endings, a header line without a
// colon, NUL bytes; the test then fails with the server's reason.
func (u *User) Append(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) imap.UID {
	u.t.Helper()
	return u.Helpers.Append(folder, raw, internalDate, flags...)
}

// TryAppend is Append returning the server's refusal, an *imap.Error,
// instead of failing the test, for tests of what Cyrus refuses.
func (u *User) TryAppend(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) (imap.UID, error) {
	return u.withHelper.Append(folder, raw, internalDate, flags...)
}

// DeleteFolder deletes folder. Cyrus refuses to delete INBOX and, by its
// default specialuse_protect, the special-use folders.
func (u *User) DeleteFolder(folder string) {
	u.t.Helper()
	u.Helpers.DeleteFolder(folder)
}

// TryDeleteFolder is DeleteFolder returning the server's refusal instead
// of failing the test.
func (u *User) TryDeleteFolder(folder string) error {
	return u.withHelper.DeleteFolder(folder)
}

// RecreateFolder deletes folder and creates it again, empty, and returns
// its new UIDVALIDITY, which differs from the old one (the test fails
// otherwise). It does not work for INBOX or a special-use folder (see
// DeleteFolder).
func (u *User) RecreateFolder(folder string) uint32 {
	u.t.Helper()
	return u.Helpers.RecreateFolder(folder)
}
