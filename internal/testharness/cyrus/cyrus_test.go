package cyrus_test

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/mailbox/mailboxtest"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

func TestMain(m *testing.M) {
	code := m.Run()
	cyrus.StopShared()
	os.Exit(code)
}

var message = mailboxtest.Message

func capSet(t *testing.T, c *imapclient.Client) imap.CapSet {
	t.Helper()
	data, err := c.Capability().Wait()
	require.NoError(t, err)
	return data
}

// greeting reads the first line addr sends, over TLS when config is set.
func greeting(t *testing.T, addr string, config *tls.Config) string {
	t.Helper()
	var conn net.Conn
	var err error
	if config != nil {
		conn, err = tls.Dial("tcp", addr, config)
	} else {
		conn, err = net.Dial("tcp", addr)
	}
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	line, err := bufio.NewReader(conn).ReadString('\n')
	require.NoError(t, err)
	return line
}

func TestStartAdvertisesExtensions(t *testing.T) {
	t.Parallel()
	s := cyrus.Start(t)
	t.Logf("cyrus start-up took %v (%s)", s.StartupTime(), s.Packages())
	require.Contains(t, s.Packages(), "cyrus-imapd_3.6.")
	require.Equal(t, "127.0.0.1", s.Host())
	require.True(t, strings.HasPrefix(s.Addr(), "127.0.0.1:"))
	require.True(t, strings.HasPrefix(s.TLSAddr(), "127.0.0.1:"))
	require.NotEqual(t, s.Port(), s.TLSPort())

	u := s.AddUser("alice", "secret")
	caps := capSet(t, u.Dial())
	for _, c := range []imap.Cap{
		imap.CapIMAP4rev1, imap.CapIdle, imap.CapCondStore, imap.CapQResync, imap.CapMove,
		imap.CapUIDPlus, imap.CapSpecialUse, imap.CapListStatus, imap.CapESearch, imap.CapEnable,
		imap.CapListExtended, "COMPRESS=DEFLATE", "OBJECTID",
	} {
		require.True(t, caps.Has(c), "missing %s in %v", c, caps)
	}
	require.False(t, caps.Has("NOTIFY"), "Cyrus 3.6 has no NOTIFY")
	require.True(t, caps.Has(imap.CapLoginDisabled), "Cyrus lists LOGINDISABLED once logged in, even over TLS")

	pre := greeting(t, s.Addr(), nil)
	require.Contains(t, pre, " STARTTLS")
	for _, m := range cyrus.DefaultAuthMechanisms {
		require.Contains(t, pre, " AUTH="+m)
	}
	require.Contains(t, greeting(t, s.TLSAddr(), s.TLSConfig()), "Cyrus IMAP 3.6")

	// STARTTLS on the plain port verifies against the CA too.
	c, err := imapclient.DialStartTLS(s.Addr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Login(u.Name(), u.Password()).Wait())
}

func TestUserHelpers(t *testing.T) {
	t.Parallel()
	mailboxtest.Run(t, func(t *testing.T) mailboxtest.User { return cyrus.Shared(t).NewUser() })
}

// TestAppendRefusals: what Cyrus refuses to store, all of which but the
// empty message Dovecot stores (see the package documentation), and the
// 8-bit header bytes it rewrites.
func TestAppendRefusals(t *testing.T) {
	t.Parallel()
	u := cyrus.Shared(t).NewUser()
	for name, tc := range map[string]struct {
		raw  string
		text string
	}{
		"bare LF line endings":     {"From: a@example.org\nSubject: lf\n\nbody\n", "bare newlines"},
		"a header without a colon": {"From a@example.org\r\nX-Bad Header: yes\r\nSubject: x\r\n\r\nbody\r\n", "invalid header"},
		"no header at all":         {"just a body line\r\n", "invalid header"},
		"a NUL byte":               {"Subject: nul\x00here\r\n\r\nbody\r\n", "NUL"},
		"no bytes at all":          {"", "Zero-length"},
	} {
		_, err := u.TryAppend("INBOX", []byte(tc.raw), time.Time{})
		require.Error(t, err, name)
		require.Contains(t, err.Error(), tc.text, name)
	}
	require.Empty(t, u.UIDs("INBOX"))

	// A header with 8-bit bytes, UTF-8 or not, is stored with an X in
	// place of each of them (munge8bit); the body's are kept.
	uid := u.Append("INBOX", []byte("Subject: caf\xc3\xa9 \xff\r\n\r\ncaf\xc3\xa9\r\n"), time.Time{})
	require.Equal(t, "Subject: cafXX X\r\n\r\ncaf\xc3\xa9\r\n", string(u.Message("INBOX", uid).FindBodySection(&imap.FetchItemBodySection{})))
}

// TestProtectedFolders: Cyrus refuses to delete INBOX and, by default,
// the special-use folders.
func TestProtectedFolders(t *testing.T) {
	t.Parallel()
	u := cyrus.Shared(t).NewUser()
	require.Error(t, u.TryDeleteFolder("INBOX"))
	require.Error(t, u.TryDeleteFolder("Archive"))
	require.Empty(t, u.UIDs("Archive"), "Archive is still there")
	u.CreateFolder("Work")
	require.NoError(t, u.TryDeleteFolder("Work"))
}

func TestSpecialUseFolders(t *testing.T) {
	t.Parallel()
	u := cyrus.Shared(t).NewUser()
	list, err := u.Dial().List("", "*", &imap.ListOptions{ReturnSpecialUse: true}).Collect()
	require.NoError(t, err)
	attrs := map[string][]imap.MailboxAttr{}
	for _, m := range list {
		require.Equal(t, cyrus.Separator, m.Delim)
		attrs[m.Mailbox] = m.Attrs
	}
	require.Contains(t, attrs, "INBOX")
	for folder, attr := range cyrus.SpecialUseFolders {
		found := false
		for _, a := range attrs[folder] {
			found = found || strings.EqualFold(string(a), attr)
		}
		require.True(t, found, "%s: %v", folder, attrs[folder])
	}
}

// TestSpecialUseAttributesInLowerCase shows what LIST sends on the wire:
// Cyrus writes the attributes as it stores them, in lower case, which
// RFC 3501 allows (flags and attributes are case-insensitive).
func TestSpecialUseAttributesInLowerCase(t *testing.T) {
	t.Parallel()
	s := cyrus.Shared(t)
	u := s.NewUser()
	conn, err := net.Dial("tcp", s.Addr())
	require.NoError(t, err)
	defer conn.Close()
	require.NoError(t, conn.SetDeadline(time.Now().Add(10*time.Second)))
	r := bufio.NewReader(conn)
	_, err = r.ReadString('\n')
	require.NoError(t, err)
	fmt.Fprintf(conn, "a LOGIN %s %s\r\nb LIST \"\" Archive\r\n", u.Name(), u.Password())
	var lines []string
	for {
		line, err := r.ReadString('\n')
		require.NoError(t, err)
		lines = append(lines, strings.TrimSpace(line))
		if strings.HasPrefix(line, "b ") {
			break
		}
	}
	require.Contains(t, lines, `* LIST (\HasNoChildren \archive) "/" Archive`)
}

func TestEmailIDSurvivesCopyAndMove(t *testing.T) {
	t.Parallel()
	u := cyrus.Shared(t).NewUser()
	u.CreateFolder("Filed")
	first := u.Append("INBOX", message(1), time.Time{})
	second := u.Append("INBOX", message(2), time.Time{})
	// The same content appended twice is one email to Cyrus.
	again := u.Append("INBOX", message(1), time.Time{})
	ids := u.EmailIDs("INBOX")
	require.Len(t, ids, 3)
	require.NotEqual(t, ids[first], ids[second])
	require.Equal(t, ids[first], ids[again])

	c := u.Dial()
	_, err := c.Select("INBOX", nil).Wait()
	require.NoError(t, err)
	copied, err := c.Copy(imap.UIDSetNum(first), "Filed").Wait()
	require.NoError(t, err)
	moved, err := c.Move(imap.UIDSetNum(second), "Filed").Wait()
	require.NoError(t, err)
	filed := u.EmailIDs("Filed")
	dest, _ := copied.DestUIDs.Nums()
	require.Equal(t, ids[first], filed[dest[0]])
	movedTo, ok := moved.DestUIDs.(imap.UIDSet)
	require.True(t, ok, "%T", moved.DestUIDs)
	dest, _ = movedTo.Nums()
	require.Equal(t, ids[second], filed[dest[0]])
	require.Regexp(t, `^M[0-9a-f]{24}$`, ids[first])
}

func TestSessionsRecordTheClientAfterLogin(t *testing.T) {
	t.Parallel()
	u := cyrus.Shared(t).NewUser()
	u.Append("INBOX", message(1), time.Time{})
	require.Empty(t, u.Sessions(), "the helper's own sessions are left out")
	u.EmailIDs("INBOX")
	require.Empty(t, u.Sessions(), "and so are the raw ones")

	c := u.Dial()
	_, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
	require.NoError(t, err)
	_, err = c.Fetch(imap.UIDSetNum(1), &imap.FetchOptions{Flags: true}).Collect()
	require.NoError(t, err)
	sessions := u.Sessions()
	require.Len(t, sessions, 1)
	text := strings.Join(sessions[0], "\n")
	require.Contains(t, text, "EXAMINE INBOX")
	require.Contains(t, text, "UID FETCH 1 (UID FLAGS)")
	require.NotContains(t, text, u.Password(), "the login is not recorded")
}

func TestIdleHearsAnotherSession(t *testing.T) {
	t.Parallel()
	s := cyrus.Shared(t)
	u := s.NewUser()
	uid := u.Append("INBOX", message(1), time.Time{})
	events := make(chan string, 16)
	c, err := imapclient.DialTLS(s.TLSAddr(), &imapclient.Options{
		TLSConfig: s.TLSConfig(),
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			Mailbox: func(data *imapclient.UnilateralDataMailbox) {
				if data.NumMessages != nil {
					events <- fmt.Sprintf("EXISTS %d", *data.NumMessages)
				}
			},
			Expunge: func(seq uint32) { events <- fmt.Sprintf("EXPUNGE %d", seq) },
			Fetch:   func(*imapclient.FetchMessageData) { events <- "FETCH" },
		},
	})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Login(u.Name(), u.Password()).Wait())
	_, err = c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
	require.NoError(t, err)
	idle, err := c.Idle()
	require.NoError(t, err)
	defer idle.Close()

	hear := func(want string, change func()) {
		t.Helper()
		start := time.Now()
		change()
		for {
			select {
			case got := <-events:
				if got == want {
					t.Logf("%s heard after %v", want, time.Since(start))
					require.Less(t, time.Since(start), 5*time.Second, "idled tells IDLE at once, not at the 60 s poll")
					return
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("no %s within 10 s", want)
			}
		}
	}
	hear("EXISTS 2", func() { u.Append("INBOX", message(2), time.Time{}) })
	hear("FETCH", func() { u.SetFlags("INBOX", uid, []imap.Flag{imap.FlagFlagged}, nil) })
	hear("EXPUNGE 1", func() { u.Expunge("INBOX", uid) })
}

func TestRestartKeepsMailAndReconnectsHelpers(t *testing.T) {
	t.Parallel()
	s := cyrus.Start(t)
	u := s.AddUser("gina", "pw")
	uid := u.Append("INBOX", message(1), time.Time{}, imap.FlagSeen)
	c := u.Dial()
	addr, tlsAddr := s.Addr(), s.TLSAddr()

	s.Stop()
	select {
	case <-c.Closed():
	case <-time.After(5 * time.Second):
		t.Fatal("client connection survived Stop")
	}

	s.Restart()
	require.Equal(t, addr, s.Addr())
	require.Equal(t, tlsAddr, s.TLSAddr())
	require.Equal(t, []imap.Flag{imap.FlagSeen}, u.Flags("INBOX", uid))
	t.Logf("restart took %v", s.StartupTime())
}

func TestAddUserOnRunningServer(t *testing.T) {
	t.Parallel()
	s := cyrus.Shared(t)
	first := s.NewUser()
	first.Dial()
	for i := range 5 {
		u := s.NewUser()
		require.Equal(t, imap.UID(1), u.Append("INBOX", message(i), time.Time{}))
	}
	c, err := imapclient.DialTLS(s.TLSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	require.NoError(t, err)
	defer c.Close()
	start := time.Now()
	require.Error(t, c.Login(first.Name(), first.Password()+"x").Wait(), "a wrong password is refused")
	require.Less(t, time.Since(start), 2*time.Second, "without Cyrus's 3 s pause after a failed login")
}

func TestSharedServerIsolatesUsers(t *testing.T) {
	t.Parallel()
	s := cyrus.Shared(t)
	a := s.NewUser()
	a.Append("INBOX", message(1), time.Time{})
	for i := range 3 {
		t.Run(fmt.Sprint(i), func(t *testing.T) {
			t.Parallel()
			b := s.For(t).NewUser()
			require.NotEqual(t, a.Name(), b.Name())
			require.Empty(t, b.UIDs("INBOX"))
			b.Append("INBOX", message(i), time.Time{})
		})
	}
	require.Len(t, a.UIDs("INBOX"), 1)
}

func TestWithoutCapabilities(t *testing.T) {
	t.Parallel()
	s := cyrus.Start(t, cyrus.WithoutCapabilities("QRESYNC", "COMPRESS=DEFLATE"))
	caps := capSet(t, s.NewUser().Dial())
	require.False(t, caps.Has(imap.CapQResync))
	require.True(t, caps.Has(imap.CapCondStore))
	require.True(t, caps.Has("COMPRESS=DEFLATE"), "Cyrus offers COMPRESS whatever the list says")
}

func TestWithCA(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	s := cyrus.Start(t, cyrus.WithCA(ca))
	require.Same(t, ca, s.CA())
	conn, err := tls.Dial("tcp", s.TLSAddr(), ca.ClientTLSConfig())
	require.NoError(t, err)
	conn.Close()
}

func TestStopSharedRemovesItsDirectory(t *testing.T) {
	// Not parallel: it stops the shared server under no other test.
	dir := cyrus.Shared(t).Dir()
	require.DirExists(t, dir)
	require.FileExists(t, filepath.Join(dir, "imapd.conf"))
	cyrus.StopShared()
	require.NoDirExists(t, dir)
}
