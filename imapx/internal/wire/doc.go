// Package wire is the transport under MailFathom's IMAP adapter (package
// imapx): the socket every connection runs over, the watchdog that bounds a
// command, and the error types both go-imap's connections and this
// package's report, which imapx exports under the same names.
package wire
