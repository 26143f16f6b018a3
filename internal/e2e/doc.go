// Package e2e holds MailFathom's end-to-end tests and its synchronization
// benchmark. They build the mailfathom binary once per test binary and run
// it as `mailfathom serve` subprocesses, configured by MAILFATHOM_
// variables only, against a real PostgreSQL (package pgtest, or a durable
// private cluster for the benchmark) and a real Dovecot reached over TLS
// (package dovecot): what they observe is what an operator's deployment
// does, crashes and replicas included.
//
// The package has no code outside its tests; README.md says how to run the
// benchmark and how to read its figures.
package e2e
