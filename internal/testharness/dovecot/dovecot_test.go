package dovecot_test

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/tls"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailbox/mailboxtest"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dovecot.StopShared()
	os.Exit(code)
}

var message = mailboxtest.Message

func capSet(t *testing.T, c *imapclient.Client) imap.CapSet {
	t.Helper()
	data, err := c.Capability().Wait()
	require.NoError(t, err)
	return data
}

func TestStartAdvertisesExtensions(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t)
	t.Logf("dovecot start-up took %v", s.StartupTime())
	require.Equal(t, "127.0.0.1", s.Host())
	require.True(t, strings.HasPrefix(s.Addr(), "127.0.0.1:"))
	require.True(t, strings.HasPrefix(s.TLSAddr(), "127.0.0.1:"))
	require.NotEqual(t, s.Port(), s.TLSPort())

	u := s.AddUser("alice", "secret")
	caps := capSet(t, u.Dial())
	for _, c := range []imap.Cap{
		imap.CapIMAP4rev1, imap.CapIdle, imap.CapCondStore, imap.CapQResync, imap.CapMove,
		imap.CapUIDPlus, imap.CapSpecialUse, imap.CapListStatus, imap.CapESearch,
		"COMPRESS=DEFLATE", "NOTIFY", imap.CapEnable, imap.CapListExtended,
	} {
		require.True(t, caps.Has(c), "missing %s in %v", c, caps)
	}

	pre := dialRaw(t, "", s.Addr(), nil)
	require.Contains(t, pre.Greeting, " STARTTLS")
	for _, m := range []string{"PLAIN", "LOGIN", "CRAM-MD5", "SCRAM-SHA-1", "SCRAM-SHA-256"} {
		require.Contains(t, pre.Greeting, " AUTH="+m)
	}

	// STARTTLS on the plain port verifies against the CA too.
	c, err := imapclient.DialStartTLS(s.Addr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	require.NoError(t, err)
	defer c.Close()
	require.NoError(t, c.Login(u.Name(), u.Password()).Wait())
}

func TestUserHelpers(t *testing.T) {
	t.Parallel()
	mailboxtest.Run(t, func(t *testing.T) mailboxtest.User { return dovecot.Shared(t).NewUser() })
}

func TestRenameFolderKeepsUIDs(t *testing.T) {
	t.Parallel()
	u := dovecot.Shared(t).NewUser()
	u.CreateFolder("Work/Clients")
	v1 := u.UIDValidity("Work/Clients")
	for i := range 3 {
		u.Append("Work/Clients", message(i), time.Time{})
	}
	u.Expunge("Work/Clients", 2)

	u.RenameFolder("Work", "Jobs")
	require.Equal(t, v1, u.UIDValidity("Jobs/Clients"), "rename keeps UIDVALIDITY")
	require.Equal(t, []imap.UID{1, 3}, u.UIDs("Jobs/Clients"))
	require.NotEqual(t, v1, u.RecreateFolder("Jobs/Clients"))
}

func TestSeedMaildirAssignsUIDsInWriteOrder(t *testing.T) {
	t.Parallel()
	u := dovecot.Shared(t).NewUser()
	const n = 1000
	base := time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC)
	msgs := make([]dovecot.SeedMessage, n)
	dates := make([]time.Time, n)
	for i := range msgs {
		// Dates in random order, so UIDs cannot follow them by accident.
		dates[i] = base.Add(time.Duration(rand.IntN(365*24*3600)) * time.Second)
		msgs[i] = dovecot.SeedMessage{Raw: message(i + 1), InternalDate: dates[i], Seen: i%3 == 0}
	}
	msgs[7].Flags = []imap.Flag{imap.FlagFlagged, imap.FlagAnswered}

	begin := time.Now()
	uids := u.SeedMaildir("INBOX", msgs)
	t.Logf("seeded %d messages in %v", n, time.Since(begin))

	want := make([]imap.UID, n)
	for i := range want {
		want[i] = imap.UID(i + 1)
	}
	require.Equal(t, want, uids)
	require.Equal(t, want, u.UIDs("INBOX"))

	c := u.Dial()
	_, err := c.Select("INBOX", &imap.SelectOptions{ReadOnly: true}).Wait()
	require.NoError(t, err)
	fetched, err := c.Fetch(imap.UIDSetNum(want...), &imap.FetchOptions{UID: true, InternalDate: true, Flags: true, Envelope: true}).Collect()
	require.NoError(t, err)
	require.Len(t, fetched, n)
	for i, m := range fetched {
		require.Equal(t, imap.UID(i+1), m.UID)
		require.Equal(t, fmt.Sprintf("m%d@mailfathom.test", i+1), m.Envelope.MessageID, "UID %d", m.UID)
		require.True(t, m.InternalDate.Equal(dates[i]), "UID %d: INTERNALDATE %v, want %v", m.UID, m.InternalDate, dates[i])
		require.Equal(t, i%3 == 0, slices.Contains(m.Flags, imap.FlagSeen), "UID %d flags %v", m.UID, m.Flags)
	}
	require.ElementsMatch(t, []imap.Flag{imap.FlagFlagged, imap.FlagAnswered}, u.Flags("INBOX", 8))

	// A second batch continues after the first, also into lazily created
	// and nested folders.
	more := u.SeedMaildir("INBOX", []dovecot.SeedMessage{{Raw: message(n + 1)}, {Raw: message(n + 2)}})
	require.Equal(t, []imap.UID{n + 1, n + 2}, more)
	require.Equal(t, []imap.UID{1}, u.SeedMaildir("Archive", []dovecot.SeedMessage{{Raw: message(1)}}))
	require.Equal(t, []imap.UID{1, 2}, u.SeedMaildir(dovecot.NestedFolder, []dovecot.SeedMessage{{Raw: message(1)}, {Raw: message(2)}}))
	require.Equal(t, imap.UID(3), u.Append(dovecot.NestedFolder, message(3), time.Time{}))
}

func TestWithCapabilityNarrowsAdvertisementOnly(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithCapability("IMAP4rev1 IDLE"))
	u := s.AddUser("bob", "pw")
	caps := capSet(t, u.Dial())
	require.Equal(t, imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIdle: {}}, caps)

	pre := dialRaw(t, "", s.Addr(), nil)
	require.True(t, strings.HasPrefix(pre.Greeting, "* OK [CAPABILITY IMAP4rev1 IDLE STARTTLS AUTH="), pre.Greeting)

	// Dovecot still honours what it no longer advertises.
	rc := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
	_, st := rc.cmd("LOGIN bob pw")
	require.True(t, strings.HasPrefix(st, "OK"), st)
	untagged, st := rc.cmd("ENABLE QRESYNC")
	require.True(t, strings.HasPrefix(st, "OK"), st)
	require.Contains(t, untagged, "* ENABLED QRESYNC")
	untagged, st = rc.cmd("SELECT INBOX (CONDSTORE)")
	require.True(t, strings.HasPrefix(st, "OK"), st)
	require.True(t, slices.ContainsFunc(untagged, func(l string) bool { return strings.Contains(l, "HIGHESTMODSEQ") }), "%v", untagged)

	// Helpers keep working with the narrowed list (no UIDPLUS, UNSELECT).
	uid := u.Append("INBOX", message(1), time.Time{})
	u.Expunge("INBOX", uid)
	require.Empty(t, u.UIDs("INBOX"))
	require.NotZero(t, u.HighestModSeq("INBOX"))
}

func TestWithoutMailboxListIndexDropsNOTIFY(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithoutMailboxListIndex(),
		dovecot.WithExtraConfig(`login_greeting = MailFathom test server ready.`))
	require.Contains(t, dialRaw(t, "", s.Addr(), nil).Greeting, "] MailFathom test server ready.")
	caps := capSet(t, s.AddUser("carol", "pw").Dial())
	require.False(t, caps.Has("NOTIFY"), "%v", caps)
	require.True(t, caps.Has(imap.CapIdle))
	require.True(t, caps.Has(imap.CapQResync))
}

func TestLoginDisabledOnlyFromAnotherAddress(t *testing.T) {
	t.Parallel()
	s := dovecot.Shared(t)

	same := dialRaw(t, "127.0.0.1", s.Addr(), nil)
	require.NotContains(t, same.Greeting, "LOGINDISABLED")
	require.Contains(t, same.Greeting, "AUTH=PLAIN")

	other := dialRaw(t, "127.0.0.2", s.Addr(), nil)
	require.Contains(t, other.Greeting, " LOGINDISABLED")
	require.NotContains(t, other.Greeting, "AUTH=PLAIN")
	require.Contains(t, other.Greeting, " STARTTLS")
	u := s.NewUser()
	_, st := other.cmd("LOGIN " + u.Name() + " " + u.Password())
	require.True(t, strings.HasPrefix(st, "NO"), st)
}

func TestSpecialUseAndNestedFolders(t *testing.T) {
	t.Parallel()
	u := dovecot.Shared(t).NewUser()
	list, err := u.Dial().List("", "*", &imap.ListOptions{ReturnSpecialUse: true}).Collect()
	require.NoError(t, err)
	attrs := map[string][]imap.MailboxAttr{}
	for _, m := range list {
		require.Equal(t, dovecot.Separator, m.Delim)
		attrs[m.Mailbox] = m.Attrs
	}
	require.Contains(t, attrs, "INBOX")
	require.Contains(t, attrs, dovecot.NestedFolder)
	for folder, attr := range dovecot.SpecialUseFolders {
		require.Contains(t, attrs[folder], imap.MailboxAttr(attr), "%s: %v", folder, attrs[folder])
	}
	require.Equal(t, []imap.UID(nil), u.UIDs(dovecot.NestedFolder))
}

func TestWithoutSTARTTLS(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithoutSTARTTLS())
	require.True(t, strings.HasPrefix(s.Addr(), "127.0.0.3:"), s.Addr())
	pre := dialRaw(t, "", s.Addr(), nil)
	require.NotContains(t, pre.Greeting, "STARTTLS")
	// 127.0.0.1 dialing 127.0.0.3 is not "secured" in Dovecot's sense.
	require.Contains(t, pre.Greeting, " LOGINDISABLED")
	_, st := pre.cmd("STARTTLS")
	require.True(t, strings.HasPrefix(st, "BAD"), st)

	_, err := imapclient.DialStartTLS(s.Addr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
	require.Error(t, err)

	u := s.AddUser("dave", "pw")
	require.Empty(t, u.UIDs("INBOX"), "implicit TLS still works")
}

func TestSASLMechanismsAndLog(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t)
	u := s.AddUser("erin", "p@ss w0rd")

	for _, tc := range []struct {
		mech string
		next func([]byte) []byte
	}{
		{"CRAM-MD5", cramMD5(u.Name(), u.Password())},
		{"SCRAM-SHA-1", scram(t, sha1.New, u.Name(), u.Password())},
		{"SCRAM-SHA-256", scram(t, sha256.New, u.Name(), u.Password())},
	} {
		rc := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
		st := rc.authenticate(tc.mech, tc.next)
		require.True(t, strings.HasPrefix(st, "OK"), "%s: %s", tc.mech, st)
		line := s.WaitLog("user=<erin>, method="+tc.mech+",", dovecot.LogWait)
		require.Contains(t, line, "Login:")
	}

	// Three failures from one address: Dovecot's auth penalty would make
	// the next login from it wait 8 s (2, 4, then 8 s per failure).
	for range 3 {
		rc := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
		st := rc.authenticate("CRAM-MD5", cramMD5(u.Name(), "wrong"))
		require.True(t, strings.HasPrefix(st, "NO"), st)
	}
	s.WaitLog("cram-md5(erin,127.0.0.1", dovecot.LogWait)

	// No auth penalty: the next login from the same address is not held
	// back. The bound leaves room for a busy machine, where a login was
	// seen to take over a second, and stays well below the penalty.
	begin := time.Now()
	u.Dial() // LOGIN
	require.Less(t, time.Since(begin), 4*time.Second)
	s.WaitLog("user=<erin>, method=PLAIN,", dovecot.LogWait)
	require.NotContains(t, s.Log(), "Error:")
}

func TestWithAuthMechanisms(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithAuthMechanisms("scram-sha-256"))
	pre := dialRaw(t, "", s.Addr(), nil)
	require.Contains(t, pre.Greeting, "AUTH=SCRAM-SHA-256")
	require.NotContains(t, pre.Greeting, "AUTH=PLAIN")
	require.NotContains(t, pre.Greeting, "AUTH=CRAM-MD5")
	u := s.AddUser("frank", "pw")
	rc := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
	st := rc.authenticate("CRAM-MD5", cramMD5(u.Name(), u.Password()))
	require.True(t, strings.HasPrefix(st, "NO"), st)
	// The IMAP LOGIN command, which the helpers use, still works.
	require.Empty(t, u.UIDs("INBOX"))
}

func TestAddUserOnRunningServer(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t)
	first := s.AddUser("u0", "pw0")
	first.Dial()
	// Each user is usable at once, within the same second as the previous
	// lookups.
	for i := 1; i <= 5; i++ {
		u := s.AddUser(fmt.Sprintf("u%d", i), fmt.Sprintf("pw%d", i))
		require.Equal(t, imap.UID(1), u.Append("INBOX", message(i), time.Time{}))
	}
	rc := dialRaw(t, "", s.TLSAddr(), s.TLSConfig())
	_, st := rc.cmd("LOGIN u1 pw2")
	require.True(t, strings.HasPrefix(st, "NO"), st)
}

func TestRestartKeepsMailAndReconnectsHelpers(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t)
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

func TestSharedServerIsolatesUsers(t *testing.T) {
	t.Parallel()
	s := dovecot.Shared(t)
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

// iterTB runs cleanups registered during one benchmark iteration at the
// end of that iteration instead of at the end of the benchmark.
type iterTB struct {
	testing.TB
	cleanups []func()
}

func (tb *iterTB) Cleanup(f func()) { tb.cleanups = append(tb.cleanups, f) }

func (tb *iterTB) runCleanups() {
	for i := len(tb.cleanups) - 1; i >= 0; i-- {
		tb.cleanups[i]()
	}
	tb.cleanups = nil
}

// BenchmarkStartStop measures a per-test server: start and stop alone
// ("bare"), and with a user whose helper session is open at the stop
// ("user"), which is what most tests pay.
func BenchmarkStartStop(b *testing.B) {
	for _, withUser := range []bool{false, true} {
		name := "bare"
		if withUser {
			name = "user"
		}
		b.Run(name, func(b *testing.B) {
			var startup time.Duration
			for b.Loop() {
				tb := &iterTB{TB: b}
				s := dovecot.Start(tb)
				startup += s.StartupTime()
				if withUser {
					s.AddUser("bench", "pw").UIDs("INBOX")
				}
				tb.runCleanups()
			}
			b.ReportMetric(float64(startup.Microseconds())/1000/float64(b.N), "start-ms/op")
		})
	}
}

func TestWithCertificate(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	for name, tc := range map[string]struct {
		leaf    *testca.Leaf
		wantErr bool
	}{
		"intermediate": {ca.IntermediateServer(), false},
		"wrong name":   {ca.WrongNameServer(), true},
		"other CA":     {ca.OtherCAServer(), true},
		"client only":  {ca.ClientAuthOnlyServer(), true},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := dovecot.Start(t, dovecot.WithCA(ca), dovecot.WithCertificate(tc.leaf))
			require.Same(t, ca, s.CA())
			conn, err := tls.Dial("tcp", s.TLSAddr(), s.TLSConfig())
			if tc.wantErr {
				var verr *tls.CertificateVerificationError
				require.ErrorAs(t, err, &verr)
				return
			}
			require.NoError(t, err)
			defer conn.Close()
			require.Equal(t, tc.leaf.Cert.Raw, conn.ConnectionState().PeerCertificates[0].Raw)
			// Helpers do not depend on the presented certificate.
			require.Empty(t, s.AddUser("henry", "pw").UIDs("INBOX"))
		})
	}
}

func TestWithPlaintextAuthAndDebugLog(t *testing.T) {
	t.Parallel()
	s := dovecot.Start(t, dovecot.WithPlaintextAuth(), dovecot.WithDebugLog())
	u := s.AddUser("ivy", "pw")
	other := dialRaw(t, "127.0.0.2", s.Addr(), nil)
	require.NotContains(t, other.Greeting, "LOGINDISABLED")
	require.Contains(t, other.Greeting, "AUTH=PLAIN")
	_, st := other.cmd("LOGIN ivy pw")
	require.True(t, strings.HasPrefix(st, "OK"), st)
	s.WaitLog("passwd-file(ivy,127.0.0.2", dovecot.LogWait) // an auth_debug line
	require.Empty(t, u.UIDs("INBOX"))
}

// loginProcesses returns the ids of the running imap-login processes of s.
func loginProcesses(t *testing.T, s *dovecot.Server) []int {
	t.Helper()
	raw, err := os.ReadFile(filepath.Join(s.Dir(), "run", "master.pid"))
	require.NoError(t, err)
	master := strings.TrimSpace(strings.SplitN(string(raw), "\n", 2)[0])
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // gone meanwhile
		}
		// pid (comm) state ppid ...
		open, end := strings.IndexByte(string(stat), '('), strings.LastIndexByte(string(stat), ')')
		fields := strings.Fields(string(stat[end+1:]))
		if string(stat[open+1:end]) == "imap-login" && len(fields) > 1 && fields[1] == master {
			out = append(out, pid)
		}
	}
	return out
}

// TestLoginProcessReuse: by default every connection gets a login process
// of its own; with WithLoginProcessReuse a few long-lived ones take them
// all.
func TestLoginProcessReuse(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		opts    []dovecot.Option
		atLeast int
		atMost  int
	}{
		// A login process of the default mode stays with its connection,
		// as its TLS proxy, until the connection ends.
		"Default": {atLeast: 4, atMost: 4},
		"Reuse":   {opts: []dovecot.Option{dovecot.WithLoginProcessReuse()}, atLeast: 1, atMost: 2},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := dovecot.Start(t, tc.opts...)
			u := s.AddUser("alice", "secret")
			seen := map[int]bool{}
			for range 4 {
				c, err := imapclient.DialTLS(s.TLSAddr(), &imapclient.Options{TLSConfig: s.TLSConfig()})
				require.NoError(t, err)
				require.NoError(t, c.Login(u.Name(), u.Password()).Wait())
				for _, pid := range loginProcesses(t, s) {
					seen[pid] = true
				}
				require.NoError(t, c.Logout().Wait())
				require.NoError(t, c.Close())
			}
			require.GreaterOrEqual(t, len(seen), tc.atLeast, "login processes: %v", seen)
			require.LessOrEqual(t, len(seen), tc.atMost, "login processes: %v", seen)
		})
	}
}
