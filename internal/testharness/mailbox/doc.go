// Package mailbox holds the IMAP operations a test harness performs as a
// mailbox's owner to set up and inspect mail as the server holds it:
// append, store flags, expunge, create, delete, rename and recreate
// folders, and read STATUS, UIDs, flags and whole messages; and the
// owner's long-lived session those operations run on.
//
// The server harnesses (package dovecot, package cyrus) give their User
// the operations as Helpers, which fail the test, and declare again, with
// their own documentation, those their server does differently. How a
// harness opens the owner's session is its own (Dovecot's `doveadm exec
// imap`, Cyrus's LOGIN on the plain listener). A further test server
// package reaches its users' mailboxes through the same Owner.
//
// The operations read with EXAMINE, UID FETCH with BODY.PEEK and STATUS,
// so reading changes nothing. One that needs a folder selects it only for
// its own commands and unselects it afterwards (RFC 3691), so a session
// never stays in a mailbox between operations. They never IDLE or NOTIFY.
package mailbox
