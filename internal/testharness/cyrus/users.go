package cyrus

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/internal/testharness/mailbox"
)

// usernameChars are the characters a username may contain: Cyrus lowers
// the case of login names (username_tolower), and a "." or "@" would mean
// a hierarchy or a domain to it.
const usernameChars = "abcdefghijklmnopqrstuvwxyz0123456789-_"

// User is a mail account on a Server, with helpers that set up and inspect
// its mail as the server holds it.
//
// The helpers act through an IMAP session of their own: a plaintext LOGIN
// on the plain listener, started on first use and ended in the cleanup of
// the test that created the user. Its first command is an ID naming the
// harness, by which Sessions leaves it out. Helpers select a folder only
// for the duration of one call, never leave one selected, and never use
// IDLE.
//
// The helpers report failures with t.Fatal, so they must be called from the
// test's goroutine; calls on one User are serialized.
type User struct {
	mailbox.Helpers
	t          testing.TB
	srv        *Server
	name       string
	password   string
	withHelper mailbox.Owner // the helper session, redialled after a restart
}

// AddUser creates the user name with password, usable for logins at once,
// also on a running server, and logs in once so that Cyrus creates the
// INBOX and the special-use folders (see SpecialUseFolders). The name must
// be made of lower-case letters, digits, "-" and "_" and be new on this
// server; the password must be non-empty without CR, LF or NUL.
func (s *Server) AddUser(name, password string) *User {
	s.t.Helper()
	if err := s.in.addUser(name, password); err != nil {
		s.t.Fatalf("cyrus: add user %q: %v", name, err)
	}
	u := &User{t: s.t, srv: s, name: name, password: password}
	helper := mailbox.NewSession(u.dialHelper)
	s.t.Cleanup(helper.Close)
	u.withHelper = helper.Owner(s.in.Run, errStopped)
	u.Helpers = mailbox.NewHelpers(s.t, "cyrus: user "+name, u.withHelper)
	if err := u.withHelper(func(*imapclient.Client) error { return nil }); err != nil {
		s.t.Fatalf("cyrus: add user %q: first login: %v", name, err)
	}
	return u
}

// NewUser creates a user with a name derived from the test's name plus a
// random suffix and a random password: the way to stay isolated on a
// shared server.
func (s *Server) NewUser() *User {
	s.t.Helper()
	var b strings.Builder
	for _, r := range strings.ToLower(s.t.Name()) {
		if strings.ContainsRune(usernameChars, r) {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() >= 40 {
			break
		}
	}
	return s.AddUser(b.String()+"-"+randomHex(4), randomHex(12))
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// addUser writes name into the sasldb and makes the user's telemetry
// directory, which must exist before the first login for Sessions.
//
// saslpasswd2 rewrites the Berkeley DB file in place, and Cyrus opens it
// for every authentication, unlocked: a login during the rewrite could
// read half a file. The entry is therefore added to a copy, which then
// replaces the file in one rename.
func (in *instance) addUser(name, password string) error {
	if name == "" || strings.Trim(name, usernameChars) != "" {
		return fmt.Errorf("invalid name: use lower-case letters, digits, '-' and '_'")
	}
	if password == "" || strings.ContainsAny(password, "\r\n\x00") {
		return fmt.Errorf("invalid password: must be non-empty without CR, LF or NUL")
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	if in.users[name] {
		return fmt.Errorf("user exists")
	}
	p := in.params
	logDir := filepath.Join(p.telemetryDir(), name)
	if err := os.Mkdir(logDir, 0o750); err != nil {
		return err
	}
	if err := in.chown(logDir); err != nil {
		return err
	}
	tmp := p.sasldb() + ".tmp"
	if err := copyIfExists(p.sasldb(), tmp); err != nil {
		return err
	}
	cmd := exec.Command(p.inst.saslpasswd, "-f", tmp, "-c", "-p", "-u", p.serverName(), name)
	cmd.Stdin = strings.NewReader(password)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("saslpasswd2: %w: %s", err, strings.TrimSpace(string(out)))
	}
	if err := in.chown(tmp); err != nil {
		return err
	}
	if err := os.Rename(tmp, p.sasldb()); err != nil {
		return err
	}
	in.users[name] = true
	return nil
}

func copyIfExists(from, to string) error {
	src, err := os.Open(from)
	if os.IsNotExist(err) {
		if err := os.Remove(to); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	if _, err := io.Copy(dst, src); err != nil {
		dst.Close()
		return err
	}
	return dst.Close()
}

// Name returns the login name.
func (u *User) Name() string { return u.name }

// Password returns the password.
func (u *User) Password() string { return u.password }
