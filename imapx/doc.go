// Package imapx is MailFathom's IMAP adapter over go-imap v2.
//
// Its read-side types expose no operation that can change a mailbox:
// folders are opened with EXAMINE and content is fetched with BODY.PEEK.
// The write connection is a separate type the read side cannot reach.
package imapx
