// Package serverproc runs and supervises the process of a real server a
// test harness starts (package dovecot, package cyrus): the master process
// in a process group of its own that ends with the test binary, the wait
// until it greets as the instance it is, free loopback ports and the retry
// on others when another process took one first, the count of runs by
// which a harness tells a session of an earlier run, and the one server a
// test binary may share. Instance is what a harness keeps of each server
// alike: its directory, the tail of its log for a failed test, and the
// refusal to stop one that tests share. A further server harness, such as
// one for a test IMAP server of another implementation, starts its server
// the same way.
//
// What differs between servers stays with their harness: the command line
// and environment, what proves a server ready beyond its greeting, and how
// a failed start says that a port was taken (Dovecot's log, Cyrus's exit
// status).
package serverproc
