// Package pgcluster runs a private PostgreSQL cluster from the server programs
// installed on the machine (initdb, pg_ctl, postgres).
//
// It serves two callers: the service's embedded default database, which keeps
// a persistent data directory and reuses it across restarts, and the test
// harness (internal/testharness/pgtest), which starts a throwaway cluster per
// test binary.
//
// A cluster listens on a unix socket in a directory only its owner can enter,
// and optionally on 127.0.0.1; it never listens on other addresses. Because of
// that, it is initialised with trust authentication: anyone who can reach the
// socket (the owner, and root) or, with Options.ListenTCP, any local user who
// can reach the loopback port, connects as the superuser "postgres" without a
// password. It is not meant to hold data that other local users must not read.
//
// When the process runs as root, the server programs run as the unprivileged
// "postgres" account (initdb refuses to run as root); the data directory and
// the socket directory then belong to that account.
//
// The package is Linux-only: it relies on flock(2), on /proc to recognise a
// running server, and on the Debian layout that internal/sysdeps knows.
package pgcluster
