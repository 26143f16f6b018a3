package imapx_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dovecot.StopShared()
	os.Exit(code)
}

// testBundle is one test's server, user and helpers.
type testBundle struct {
	t    testing.TB
	ctx  context.Context
	srv  *dovecot.Server
	user *dovecot.User
	// passwordCalls counts calls of the endpoints' Password functions.
	passwordCalls *countingInt
}

type countingInt struct {
	mu sync.Mutex
	n  int
}

func (c *countingInt) inc() {
	c.mu.Lock()
	c.n++
	c.mu.Unlock()
}

func (c *countingInt) get() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n
}

// setup returns a bundle on the shared Dovecot with a fresh user, or on srv
// when it is not nil.
func setup(t testing.TB, srv *dovecot.Server) *testBundle {
	t.Helper()
	if srv == nil {
		srv = dovecot.Shared(t)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return &testBundle{t: t, ctx: ctx, srv: srv, user: srv.NewUser(), passwordCalls: &countingInt{}}
}

// endpoint returns an endpoint for the user in mode sec: the implicit-TLS
// listener for TLSOnConnect, the plain one otherwise.
func (b *testBundle) endpoint(sec imapx.ConnectionSecurity) imapx.Endpoint {
	addr := b.srv.Addr()
	if sec == imapx.TLSOnConnect {
		addr = b.srv.TLSAddr()
	}
	host, portText, err := net.SplitHostPort(addr)
	require.NoError(b.t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(b.t, err)
	password := b.user.Password()
	return imapx.Endpoint{
		AccountID: "test-account",
		Host:      host,
		Port:      port,
		Security:  sec,
		TLSConfig: b.srv.TLSConfig(),
		Username:  b.user.Name(),
		Password: func(context.Context) ([]byte, error) {
			b.passwordCalls.inc()
			return []byte(password), nil
		},
		// The plain-listener tests exercise the modes that can stay
		// unencrypted, which the policy only allows with this opt-in.
		AllowInsecureConnection:       true,
		AllowClearTextOverUnencrypted: true,
	}
}

// open opens a session and closes it in the test's cleanup.
func (b *testBundle) open(ep imapx.Endpoint, opts imapx.SessionOptions) *imapx.ReadSession {
	b.t.Helper()
	s, err := imapx.OpenReadSession(b.ctx, ep, opts)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = s.Close() })
	return s
}

// openReconcile opens a session of OpenReconcileSession on ep, closed when
// the test ends.
func (b *testBundle) openReconcile(ep imapx.Endpoint, opts imapx.SessionOptions) *imapx.ReadSession {
	b.t.Helper()
	s, err := imapx.OpenReconcileSession(b.ctx, ep, opts)
	require.NoError(b.t, err)
	b.t.Cleanup(func() { _ = s.Close() })
	return s
}

// message returns a CRLF message of about size bytes whose body encodes i.
func message(i, size int) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "From: Sender %d <sender%d@example.test>\r\n", i, i)
	fmt.Fprintf(&buf, "To: rcpt@example.test\r\n")
	fmt.Fprintf(&buf, "Subject: Message number %d\r\n", i)
	fmt.Fprintf(&buf, "Message-ID: <msg-%d@example.test>\r\n", i)
	fmt.Fprintf(&buf, "Date: Mon, 02 Mar 2026 10:%02d:00 +0100\r\n", i%60)
	fmt.Fprintf(&buf, "\r\n")
	line := fmt.Sprintf("line of message %d, padding the body to the requested size.\r\n", i)
	for buf.Len() < size {
		buf.WriteString(line)
	}
	return buf.Bytes()
}

// requireUnseen fails unless none of uids in folder has \Seen on the server.
func (b *testBundle) requireUnseen(folder string, uids ...uint32) {
	b.t.Helper()
	for _, uid := range uids {
		require.NotContains(b.t, b.user.Flags(folder, imap.UID(uid)), imap.FlagSeen, "UID %d got \\Seen", uid)
	}
}

func toUint32(uids []imap.UID) []uint32 {
	out := make([]uint32, len(uids))
	for i, u := range uids {
		out[i] = uint32(u)
	}
	return out
}

// recorder records what sessions send to the server.
type recorder = wiretap.Recorder

// requireReadOnlyWire fails if r recorded a forbidden command and returns
// the recorded command names.
func requireReadOnlyWire(t testing.TB, r *recorder) []string {
	t.Helper()
	return wiretap.RequireReadOnly(t, r)
}

var timeZero time.Time

// stallTimeout is the CommandTimeout of tests that stop a connection on
// purpose: short next to the default, so a stall costs a few seconds, yet
// long enough for the establishment it also bounds (TCP, TLS, greeting,
// authentication, EXAMINE) to finish on a two-core machine busy with the
// whole suite under the race detector, where it was seen to take 4 s.
const stallTimeout = 5 * time.Second
