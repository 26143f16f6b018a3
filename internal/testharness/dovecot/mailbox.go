package dovecot

import (
	"time"

	"github.com/emersion/go-imap/v2"
)

// The helpers a User has from mailbox.Helpers change or read its mail
// through its helper connection, failing the test on any error.
// Mailbox-scoped ones SELECT (or, when they only read, EXAMINE) the folder
// and UNSELECT it afterwards, so the helper connection never stays in a
// mailbox between calls. Below are those Dovecot treats differently, and
// RenameFolder.

// Append appends raw to folder with the given INTERNALDATE (the zero time
// means the server's clock) and flags, and returns the UID the server
// assigned (from the APPENDUID response code, which Dovecot sends also when
// WithCapability hides UIDPLUS).
func (u *User) Append(folder string, raw []byte, internalDate time.Time, flags ...imap.Flag) imap.UID {
	u.t.Helper()
	return u.Helpers.Append(folder, raw, internalDate, flags...)
}

// DeleteFolder deletes folder. Dovecot refuses to delete INBOX; deleting a
// folder with children leaves it \NoSelect.
func (u *User) DeleteFolder(folder string) {
	u.t.Helper()
	u.Helpers.DeleteFolder(folder)
}

// RenameFolder renames folder (and its children) to newName. The messages
// keep their UIDs and the UIDVALIDITY is unchanged.
func (u *User) RenameFolder(folder, newName string) {
	u.t.Helper()
	u.Check(u.withHelper.RenameFolder(folder, newName), "rename %q to %q", folder, newName)
}

// RecreateFolder deletes folder and creates it again, empty, and returns its
// new UIDVALIDITY, which differs from the old one (the test fails
// otherwise). It does not work for INBOX, which Dovecot does not delete.
func (u *User) RecreateFolder(folder string) uint32 {
	u.t.Helper()
	return u.Helpers.RecreateFolder(folder)
}

// HighestModSeq returns folder's HIGHESTMODSEQ (STATUS), which Dovecot
// reports even when WithCapability hides CONDSTORE.
func (u *User) HighestModSeq(folder string) uint64 {
	u.t.Helper()
	return u.Helpers.HighestModSeq(folder)
}
