// Package dovecot runs a real Dovecot 2.3 IMAP server for tests.
//
// Start writes a configuration into a fresh directory, runs
// `dovecot -F -c <conf>` in the foreground and, in t.Cleanup, stops it and
// removes the directory. Nothing under /etc/dovecot is read: base, state
// and log paths, the TLS certificate (from package testca), the users and
// their mail all live in that directory. Start calls sysdeps.Ensure, which
// installs the dovecot-imapd package when it is missing or fails the test
// with the reason; a test never skips because Dovecot is missing.
//
//	s := dovecot.Start(t)                      // or dovecot.Shared(t)
//	u := s.AddUser("alice", "secret")          // or s.NewUser()
//	uid := u.Append("INBOX", raw, date, imap.FlagFlagged)
//	cfg := Config{Host: s.Host(), Port: s.TLSPort(), RootCAs: s.CA().CertPool(),
//		Username: u.Name(), Password: u.Password()}
//	runSync(t, cfg)
//	require.Equal(t, []imap.Flag{imap.FlagFlagged}, u.Flags("INBOX", uid))
//
// # Listeners
//
// The server listens on free loopback ports: Addr is plain IMAP with
// STARTTLS on 127.0.0.1 (127.0.0.3 with WithoutSTARTTLS), TLSAddr is
// implicit TLS on 127.0.0.1. The certificate is valid for localhost,
// 127.0.0.1, 127.0.0.2 and ::1 and signed by CA().
//
// Dovecot counts a plain connection as secured when the client's address
// equals the server's, so a client on 127.0.0.1 dialing 127.0.0.1 may log in
// in plaintext. To test the refusal of plaintext logins dial from another
// loopback address: a net.Dialer with LocalAddr 127.0.0.2 sees
// LOGINDISABLED and no AUTH=PLAIN.
//
// # Capabilities
//
// After login the default configuration advertises (Dovecot 2.3.19), among
// others: IMAP4rev1, IDLE, CONDSTORE, QRESYNC, ENABLE, MOVE, UIDPLUS,
// SPECIAL-USE, LIST-STATUS, LIST-EXTENDED, ESEARCH, COMPRESS=DEFLATE (the
// zlib plugins are loaded for it; Dovecot does not offer it otherwise) and
// NOTIFY (only because mailbox_list_index = yes). Before login it
// advertises STARTTLS on the plain port and AUTH= for each of
// DefaultAuthMechanisms. WithCapability narrows the advertised list only;
// see there for what Dovecot still accepts.
//
// # Users and authentication
//
// Users live in a Dovecot passwd-file, one file per user, so AddUser works
// on a running server at once. (Dovecot stats a passwd-file at most once a
// second and compares whole-second mtimes, so users appended to one shared
// file can stay invisible for a second; a new file is read on its first
// lookup.) Passwords are stored with the {PLAIN} scheme, which lets PLAIN,
// LOGIN, CRAM-MD5, SCRAM-SHA-1 and SCRAM-SHA-256 all work. Failed
// authentications are answered within about half a second instead of
// Dovecot's usual 2 s, and the per-IP auth penalty is disabled, so a
// wrong-password test does not slow down later logins.
//
// WithOAuth2 adds an oauth2 passdb for XOAUTH2 and OAUTHBEARER that checks
// each bearer token at a token-introspection endpoint the test serves
// (package oauthtest); the users still come from AddUser or NewUser, whose
// passwords keep working for every other mechanism.
//
// The log (Log, WaitLog) records every login with its SASL mechanism
// ("Login: user=<alice>, method=SCRAM-SHA-256, ..."), from auth_verbose.
// The User helpers do not log in over the network (see User), so such lines
// come only from the code under test and from User.Dial.
//
// Dovecot's limit of connections per user and client address is raised
// from 10 to 100.
//
// # Mail storage
//
// Mail is stored as Maildir with LAYOUT=fs, so "/" is both the IMAP
// hierarchy separator and the directory separator on disk, and INBOX is
// ~/Maildir/INBOX. Every user has the SPECIAL-USE folders Drafts, Sent,
// Trash, Junk and Archive (SpecialUseFolders) and the nested folder
// Projects/2026 (NestedFolder). Dovecot creates them lazily: LIST shows
// them at once, their directories appear on first open.
//
// # Processes
//
// The mail processes run as an unprivileged user: nobody with its primary
// group when the test runs as root, since Dovecot refuses mail access as
// UID 0, and otherwise the current user, with every Dovecot service
// running as that user and without chroot. The instance directory is mode
// 0755 so those users reach it.
//
// # Cost
//
// Measured with BenchmarkStartStop on the 2-core machine CI uses: a start
// takes 33–60 ms to the first greeting, a start and stop 50–90 ms, and
// 70–110 ms with a user whose helper session is open (the lower figures on
// an idle machine). Shared saves that per test; with so little at stake,
// Start, which isolates tests completely, is the default choice.
//
// The package does not support Dovecot 2.4, whose configuration syntax
// differs.
package dovecot
