package mailsession_test

import (
	"context"
	"net"
	"regexp"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
)

// TestWriteSession: a write connection that ended between two changes is
// found out before the next change is given to it and replaced, so the
// change is carried on a fresh connection rather than written into a dead
// one; and a command none of whose bytes left is attempted again by the
// pipeline.
func TestWriteSession(t *testing.T) {
	t.Parallel()

	type writeBundle struct {
		*testBundle
		ws     *mailsession.WriteSession
		opens  *atomic.Int32
		uids   []imap.UID
		broken *brokenWrites
	}
	// setupWrite has two messages in INBOX and an empty Archive, and a
	// write session over the plain listener (so the recorder reads the
	// commands), through target when it is not empty.
	setupWrite := func(t *testing.T, srv *dovecot.Server, target string, checkAfter time.Duration) *writeBundle {
		t.Helper()
		b := setup(t, srv, nil)
		b.user.CreateFolder("Archive")
		wb := &writeBundle{testBundle: b, opens: &atomic.Int32{}, broken: &brokenWrites{}}
		for i := range 2 {
			wb.uids = append(wb.uids, b.user.Append("INBOX", message(i, 800), time.Now()))
		}
		ep := b.endpoint(t, target)
		ep.Dial = wb.broken.dial(ep.Dial)
		ws, err := mailsession.NewWriteSession(mailsession.WriteSessionConfig{
			Registry: b.registry, Account: "acct", CheckAfter: checkAfter,
			Open: func(ctx context.Context, account string) (*imapx.WriteConnection, error) {
				require.Equal(t, "acct", account)
				wb.opens.Add(1)
				return imapx.OpenWriteConnection(ctx, ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
			},
		})
		require.NoError(t, err)
		t.Cleanup(func() { _ = ws.Close() })
		wb.ws = ws
		return wb
	}
	// move relocates the i-th message to Archive, issuing the MOVE in every
	// attempt the pipeline makes.
	move := func(t *testing.T, wb *writeBundle, i int) error {
		t.Helper()
		return wb.ws.Command(wb.ctx, "INBOX", func(ctx context.Context, w *imapx.WriteConnection, _ uint32) error {
			_, err := w.Move(ctx, uint32(wb.uids[i]), "Archive")
			return err
		})
	}
	requireMoved := func(t *testing.T, wb *writeBundle) {
		t.Helper()
		require.NotContains(t, wb.user.UIDs("INBOX"), wb.uids[0])
		require.NotContains(t, wb.user.UIDs("INBOX"), wb.uids[1])
		require.Len(t, wb.user.UIDs("Archive"), 2, "each message moved once")
	}
	moves := regexp.MustCompile(`^\S+ UID MOVE `)
	count := func(lines []string, re *regexp.Regexp) int {
		n := 0
		for _, l := range lines {
			if re.MatchString(l) {
				n++
			}
		}
		return n
	}

	t.Run("ClosedByTheServerIsReplacedBeforeUse", func(t *testing.T) {
		t.Parallel()
		srv := dovecot.Start(t)
		wb := setupWrite(t, srv, "", 0)
		require.NoError(t, move(t, wb, 0))
		// Dovecot restarts: it says BYE and closes the kept connection.
		srv.Restart()
		require.NoError(t, move(t, wb, 1))
		require.EqualValues(t, 2, wb.opens.Load(), "the closed connection was replaced")
		conns := wb.rec.Conns()
		require.Len(t, conns, 2)
		require.Equal(t, 1, count(conns[0], moves), "nothing was written into the closed connection")
		require.Equal(t, 1, count(conns[1], moves))
		requireMoved(t, wb)
	})

	t.Run("IdleOneThatStoppedAnsweringIsReplacedBeforeUse", func(t *testing.T) {
		t.Parallel()
		proxy := faultproxy.Start(t, dovecot.Shared(t).Addr())
		// Every use after the first finds the connection idle.
		wb := setupWrite(t, nil, proxy.Addr(), time.Nanosecond)
		require.NoError(t, move(t, wb, 0))
		// The path goes silent without a word, as a dropped NAT mapping
		// does: the connection still looks open.
		proxy.StallAfter(faultproxy.Existing, faultproxy.Both, 0)
		require.NoError(t, move(t, wb, 1))
		require.EqualValues(t, 2, wb.opens.Load())
		conns := wb.rec.Conns()
		require.Len(t, conns, 2)
		require.Equal(t, 1, count(conns[0], moves), "the second MOVE was not written into the silent connection")
		require.Regexp(t, `^\S+ NOOP$`, conns[0][len(conns[0])-1], "NOOP found it out")
		require.Equal(t, 1, count(conns[1], moves))
		requireMoved(t, wb)
	})

	t.Run("CommandNotSentIsAttemptedAgainOnAFreshConnection", func(t *testing.T) {
		t.Parallel()
		wb := setupWrite(t, nil, "", 0)
		require.NoError(t, move(t, wb, 0))
		// The connection breaks as the next MOVE goes out, before a byte
		// of it is written.
		wb.broken.arm(moves)
		require.NoError(t, move(t, wb, 1))
		require.Equal(t, 1, wb.broken.count())
		require.EqualValues(t, 2, wb.opens.Load(), "the attempt after the failed one ran on a fresh connection")
		requireMoved(t, wb)
	})
}

// brokenWrites ends a connection at the first write of a command matching
// its armed pattern, writing none of it: a connection that breaks just as
// a command goes out.
type brokenWrites struct {
	mu      sync.Mutex
	pattern *regexp.Regexp
	broke   int
}

func (b *brokenWrites) arm(pattern *regexp.Regexp) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.pattern = pattern
}

func (b *brokenWrites) count() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.broke
}

func (b *brokenWrites) trip(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pattern == nil || !b.pattern.Match(p) {
		return false
	}
	b.pattern = nil
	b.broke++
	return true
}

func (b *brokenWrites) dial(next func(ctx context.Context, network, addr string) (net.Conn, error)) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &brokenConn{Conn: c, b: b}, nil
	}
}

type brokenConn struct {
	net.Conn
	b *brokenWrites
}

func (c *brokenConn) Write(p []byte) (int, error) {
	if c.b.trip(p) {
		_ = c.Conn.Close()
		return 0, syscall.EPIPE
	}
	return c.Conn.Write(p)
}
