// Package gmailtest runs a Gmail-like IMAP server for tests: a real
// Dovecot behind a front filter that speaks Gmail's IMAP extensions
// (X-GM-EXT-1). Gmail shows one message in every folder that stands for
// one of its labels — INBOX for \Inbox, a folder per user label, and
// [Gmail]/All Mail for every message — under a UID of each folder and one
// X-GM-MSGID; the filter makes Dovecot's folders look like that.
//
// Why a filter before Dovecot rather than a server of its own: everything
// but the extension — authentication, LIST, EXAMINE, SEARCH, ENVELOPE,
// BODY.PEEK, CONDSTORE and QRESYNC with their MODSEQ and VANISHED answers,
// IDLE — is then a real server's, and the filter is only what Gmail adds.
// go-imap v2's server cannot be that server: its parser refuses the X-GM-*
// fetch items, it has no MODSEQ, and a backend of its own would be a
// second, less faithful, implementation of everything Dovecot already
// does.
//
// What the filter does, and only that:
//   - it advertises X-GM-EXT-1 in every capability list, and leaves out
//     COMPRESS=DEFLATE (it reads the traffic, which compression would
//     hide) and STARTTLS (it listens in the clear, on loopback);
//   - it takes X-GM-MSGID, X-GM-THRID and X-GM-LABELS out of a UID FETCH,
//     passes the rest to Dovecot, and adds them to each FETCH answer,
//     from its record of the messages Deliver placed (a message of the
//     folder it did not place gets an X-GM-MSGID of its own, stable for
//     its UID).
//
// A label is removed as on Gmail (RemoveLabel): the message leaves that
// label's folder (an EXPUNGE there), and every other folder showing it
// sees its mod-sequence move, as Gmail's do when a message's labels
// change, with its flags as they were (a keyword added and removed).
//
// It does not implement X-GM-RAW searches, X-GM-LABELS in STORE, COPY
// or SEARCH, or labels without a folder being added after delivery; nor
// does it speak TLS or COMPRESS. MailFathom asks Gmail for none of these.
package gmailtest
