// Package cyrus runs a real Cyrus IMAP 3.6 server for tests: a second
// implementation of the extensions MailFathom relies on, beside package
// dovecot, with the same shape so a test reads alike against either.
//
// Start writes an imapd.conf, a cyrus.conf and a sasldb into a fresh
// directory, runs Cyrus's master in the foreground and, in t.Cleanup, stops
// it and removes the directory. Nothing under /etc is read or written, no
// system service is started, and the servers of several tests and test
// binaries run side by side on loopback ports of their own.
//
//	s := cyrus.Shared(t)                       // or cyrus.Start(t, opts...)
//	u := s.NewUser()                           // or s.AddUser("alice", "secret")
//	uid := u.Append("INBOX", raw, date, imap.FlagFlagged)
//	cfg := Config{Host: s.Host(), Port: s.TLSPort(), RootCAs: s.CA().CertPool(),
//		Username: u.Name(), Password: u.Password()}
//	runSync(t, cfg)
//	require.Equal(t, []imap.Flag{imap.FlagFlagged}, u.Flags("INBOX", uid))
//
// # Installation
//
// Debian's cyrus-imapd conflicts with dovecot-imapd (both provide
// imap-server), so the harness does not install it: on a process's first
// start it fetches cyrus-imapd and cyrus-common of one version with
// `apt-get download` (sysdeps.Download) and unpacks them with `dpkg-deb -x`
// into /var/cache/mailfathom-cyrus when it runs as root, or a directory per
// user in the temporary directory otherwise, under a file lock beside it so
// that parallel test binaries unpack once. A process that is not root uses
// the system cache when a root run filled it. Delete the cache to fetch
// another version. cyrus-common is unpacked rather than installed because
// it would bring a mail transport agent, a system cyrus user, /etc files
// and a system service on the standard ports.
//
// What the unpacked programs need from the system is installed with
// apt-get through sysdeps.Ensure: the shared libraries they link that a
// minimal Debian 12 lacks (libxapian30, libical3, libpcre3 among them),
// libsasl2-modules and libsasl2-modules-db for the SASL mechanisms and the
// sasldb, and sasl2-bin for saslpasswd2. The harness then runs ldd on the
// programs it starts and fails, naming each missing library, when the
// dynamic linker still cannot find one. A test never skips because Cyrus is
// missing: it gets a server or fails saying why.
//
// # Listeners
//
// The server listens on free ports of 127.0.0.1: Addr is plain IMAP with
// STARTTLS, TLSAddr is implicit TLS. The certificate, from package testca,
// is valid for localhost, 127.0.0.1, 127.0.0.2 and ::1 and signed by CA().
// Plaintext logins are allowed on the plain listener (allowplaintext), so
// a test can read the wire with package wiretap.
//
// # Capabilities
//
// After login Cyrus 3.6.1 advertises, among others: IMAP4rev1, IDLE,
// CONDSTORE, QRESYNC, ENABLE, MOVE, UIDPLUS, OBJECTID (RFC 8474), SPECIAL-USE,
// CREATE-SPECIAL-USE, LIST-EXTENDED, LIST-STATUS, ESEARCH, NAMESPACE,
// COMPRESS=DEFLATE, and no NOTIFY. Before login it advertises STARTTLS on
// the plain listener and AUTH= for each of DefaultAuthMechanisms, checked
// against the sasldb; over TLS it adds SCRAM-SHA-1-PLUS and
// SCRAM-SHA-256-PLUS, the channel-bound variants, which Dovecot 2.3 does
// not offer. WithoutCapabilities
// leaves capabilities out of what is advertised, all but COMPRESS=DEFLATE,
// which Cyrus offers whatever its list says.
//
// # Users and authentication
//
// Users live in a sasldb (saslpasswd2 -f), realm the instance's
// servername, so AddUser works on a running server at once; the file is
// replaced in one rename, since Cyrus reads it unlocked on every login.
// AddUser logs the user in once, which creates the INBOX and the
// special-use folders of SpecialUseFolders (autocreate). Names are lower
// case: Cyrus lowers the case of login names. A failed login is answered
// at once (failedloginpause: 0) instead of after Cyrus's 3 s.
//
// # Processes
//
// Master, and every process it starts, runs as nobody when the test runs
// as root and as the current user otherwise; as root the harness starts
// master as nobody itself, because a process that drops its privileges
// loses the parent-death signal that ends it with its test binary. An
// instance directory whose test binary ended without removing it (a
// shared server's, when TestMain does not call StopShared) is removed,
// with any master still serving it, when the next instance is made.
//
// # Logs
//
// Cyrus logs through syslog(3), which the harness does not capture (a
// container often has no /dev/log at all); Log holds only what its
// processes print on standard error, such as a fatal configuration error.
// In its place Sessions returns Cyrus's telemetry: every command each of a
// user's sessions sent after logging in, as the server read it, inside TLS
// and COMPRESS. The harness's own sessions, which begin with an ID naming
// the harness, are left out.
//
// # How Cyrus differs from Dovecot
//
// Measured on Cyrus IMAP 3.6.1 (Debian 3.6.1-4+deb12u4), each with a test
// in this package or beside the product code it concerns:
//
//   - APPEND refuses a message with bare LF line endings ("Message contains
//     bare newlines"; Dovecot stores it and serves CRLF), a header line
//     without a colon, an mbox "From " line among them, or no header at all
//     ("invalid header"; Dovecot stores it as given), and a NUL byte
//     (Dovecot stores 0x80 in its place). Both refuse an empty message.
//     User.Append fails the test on a refusal; TryAppend returns it.
//   - APPEND replaces every 8-bit byte of a header, UTF-8 or not, with "X"
//     (munge8bit), and keeps the body's; Dovecot keeps both. What Cyrus
//     serves, and what a synchronization stores, then differs from what
//     was appended.
//   - LIST writes special-use attributes in lower case (`\archive`), as
//     Cyrus stores them; go-imap, and so MailFathom, reads them in IMAP's
//     spelling.
//   - INBOX and, by default (specialuse_protect), the special-use folders
//     cannot be deleted: a test that recreates a folder uses one of its
//     own. Creating a/b creates a as a folder of
//     its own, where Dovecot lists a \Noselect placeholder.
//   - Deleted folders are removed at once (delete_mode: immediate): with
//     Cyrus's default, delayed, the same folder deleted twice within a
//     second is refused ("Mailbox already exists").
//   - IDLE reports come from idled, which cyrus.conf starts: a delivery
//     ("* n EXISTS" with "* n RECENT"), a flag change ("* n FETCH (FLAGS
//     ...)", without UID as from Dovecot) and an expunge reach an idling
//     session within milliseconds. Without idled Cyrus looks only every
//     imapidlepoll, 60 s; Start waits for idled's socket.
//   - EMAILID (OBJECTID) is the content's: the same bytes appended twice,
//     copied or moved share one, in every folder (User.EmailIDs reads it;
//     go-imap cannot).
//   - After login the capability list carries LOGINDISABLED, even over TLS.
//
// # Cost
//
// Measured on the 2-core machine CI uses: a start takes 150–250 ms to the
// first greeting with idled ready, a restart 50–100 ms, and a user 130–270
// ms, most of it the first login that creates its six folders. Shared saves
// the start per test; tests that restart or reconfigure the server use
// Start. The telemetry log writes what a session reads and sends, message
// bodies included, so a test of thousands of messages pays for it.
package cyrus
