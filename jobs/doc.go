// Package jobs holds the argument types of MailFathom's River jobs and the
// insert options that go with each.
//
// Arguments carry identifiers only (account id, alias, binding id, email id,
// mutation id): River UI shows them to anyone who can open it, so no
// address, subject, folder path or body may ever be one. This package
// imports neither IMAP nor SQL.
package jobs
