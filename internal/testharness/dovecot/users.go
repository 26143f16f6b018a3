package dovecot

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/internal/testharness/mailbox"
)

// usernameChars are the characters a username may contain: Dovecot's
// default auth_username_chars, all safe in the per-user file name.
const usernameChars = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_@"

// User is a mail account on a Server, with helpers that set up and inspect
// its mail as the server holds it.
//
// The helpers act through a pre-authenticated IMAP session of their own,
// `doveadm exec imap -u <user>` over pipes, started on first use and ended
// in the cleanup of the test that created the user. It is not a network
// login, so the helpers work whatever WithAuthMechanisms, WithoutSTARTTLS
// or a faultproxy in front of the server do, and they add no "Login:"
// lines to the log. It still resolves the user through the running
// server's userdb, runs as the mail user and sees the same capabilities
// (imap_capability applies), so what it reads is what an IMAP client of
// that server gets. Helpers select a folder only for the duration of one
// call, never leave one selected, and never use IDLE or NOTIFY.
//
// The helpers report failures with t.Fatal, so they must be called from the
// test's goroutine; calls on one User are serialized.
type User struct {
	mailbox.Helpers
	t          testing.TB
	srv        *Server
	name       string
	password   string
	home       string
	withHelper mailbox.Owner // the helper connection, redialled after a restart
}

// AddUser creates the user name with password and an empty mailbox, usable
// for logins at once, also on a running server. The name must be made of
// letters, digits and ".-_@", not start with ".", and be new on this
// server; the password must be non-empty and contain no ':', CR, LF or NUL
// (the passwd-file format's separators).
func (s *Server) AddUser(name, password string) *User {
	s.t.Helper()
	u, err := s.in.addUser(name, password)
	if err != nil {
		s.t.Fatalf("dovecot: add user %q: %v", name, err)
	}
	u.t, u.srv = s.t, s
	helper := mailbox.NewSession(func() (*imapclient.Client, func(), error) { return s.in.dialHelper(name) })
	s.t.Cleanup(helper.Close)
	u.withHelper = helper.Owner(s.in.Run, errStopped)
	u.Helpers = mailbox.NewHelpers(s.t, "dovecot: user "+name, u.withHelper)
	return u
}

// NewUser creates a user with a name derived from the test's name plus a
// random suffix and a random password: the way to stay isolated on a
// shared server.
func (s *Server) NewUser() *User {
	s.t.Helper()
	var b strings.Builder
	for _, r := range s.t.Name() {
		if strings.ContainsRune(usernameChars, r) && r != '@' {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	name := strings.TrimLeft(strings.ToLower(b.String()), ".") + "-" + randomHex(4)
	return s.AddUser(name, randomHex(12))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (in *instance) addUser(name, password string) (*User, error) {
	if name == "" || strings.HasPrefix(name, ".") || strings.Trim(name, usernameChars) != "" {
		return nil, fmt.Errorf("invalid name: use letters, digits and %q, not starting with '.'", ".-_@")
	}
	if password == "" || strings.ContainsAny(password, ":\r\n\x00") {
		return nil, fmt.Errorf("invalid password: must be non-empty without ':', CR, LF or NUL")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.users[name] {
		return nil, fmt.Errorf("user exists")
	}
	home := filepath.Join(in.params.homeDir(), name)
	if err := os.Mkdir(home, 0o700); err != nil {
		return nil, err
	}
	if err := in.chownMail(home); err != nil {
		return nil, err
	}
	// passwd-file line: user:password:uid:gid:gecos:home:shell:extra. uid,
	// gid and home come from mail_uid, mail_gid and default_fields.
	line := name + ":{PLAIN}" + password + "::::::\n"
	path := filepath.Join(in.params.usersDir(), name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(line), 0o644); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, err
	}
	in.users[name] = true
	return &User{name: name, password: password, home: home}, nil
}

// chownMail gives path to the mail user when running as root.
func (in *instance) chownMail(path string) error {
	if !in.params.id.root {
		return nil
	}
	return os.Lchown(path, in.params.id.mailUID, in.params.id.mailGID)
}

// Name returns the login name.
func (u *User) Name() string { return u.name }

// Password returns the password.
func (u *User) Password() string { return u.password }

// Home returns the user's home directory; mail is in Home()/Maildir.
func (u *User) Home() string { return u.home }

// SetPassword changes the user's password on the running server, as an
// operator rotating a credential would. Dovecot re-reads a passwd-file when
// its modification time changes, which it compares to the second, and
// looks at most once a second, so the file's time is moved forward past any
// earlier write and SetPassword returns only after that second has passed.
func (u *User) SetPassword(password string) {
	u.t.Helper()
	if password == "" || strings.ContainsAny(password, ":\r\n\x00") {
		u.t.Fatalf("dovecot: invalid password")
	}
	in := u.srv.in
	in.mu.Lock()
	defer in.mu.Unlock()
	path := filepath.Join(in.params.usersDir(), u.name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(u.name+":{PLAIN}"+password+"::::::\n"), 0o644); err != nil {
		u.t.Fatalf("dovecot: set password: %v", err)
	}
	later := time.Now().Add(2 * time.Second)
	if err := os.Chtimes(tmp, later, later); err != nil {
		u.t.Fatalf("dovecot: set password: %v", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		u.t.Fatalf("dovecot: set password: %v", err)
	}
	u.password = password
	time.Sleep(1100 * time.Millisecond)
}
