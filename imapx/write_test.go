package imapx_test

import (
	"context"
	"errors"
	"net"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// The capability lists the write tests advertise: Dovecot still carries
// out MOVE and UID EXPUNGE when they are not listed, so these tests show
// that the write connection honours what is advertised.
const (
	capsNoMove        = "IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN UIDPLUS"
	capsNoMoveNoPlus  = "IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN"
	writeTestInternal = "2026-03-02T10:00:00Z"
)

func TestWriteConnection(t *testing.T) {
	t.Parallel()

	servers := map[string]func(t *testing.T) *dovecot.Server{
		"WithMove":    func(t *testing.T) *dovecot.Server { return dovecot.Shared(t) },
		"WithoutMove": func(t *testing.T) *dovecot.Server { return dovecot.Start(t, dovecot.WithCapability(capsNoMove)) },
	}

	type writeBundle struct {
		*testBundle
		w       *imapx.WriteConnection
		rec     *recorder
		target  imap.UID // the message the change is asked of
		owners  imap.UID // a message the owner flagged \Deleted themselves
		srcUV   uint32
		archive string
	}
	when, err := time.Parse(time.RFC3339, writeTestInternal)
	require.NoError(t, err)
	setupWrite := func(t *testing.T, srv *dovecot.Server) *writeBundle {
		t.Helper()
		b := setup(t, srv)
		wb := &writeBundle{testBundle: b, rec: &recorder{}, archive: "Archive"}
		b.user.CreateFolder(wb.archive)
		wb.target = b.user.Append("INBOX", message(1, 500), when)
		wb.owners = b.user.Append("INBOX", message(2, 500), when, imap.FlagDeleted)
		wb.srcUV = b.user.UIDValidity("INBOX")
		// Unencrypted, so the recorder reads the commands themselves.
		ep := b.endpoint(imapx.None)
		ep.Dial = wb.rec.Dial("")
		w, err := imapx.OpenWriteConnection(b.ctx, ep, imapx.SessionOptions{})
		require.NoError(t, err)
		t.Cleanup(func() { _ = w.Close() })
		wb.w = w
		uv, err := w.Select(b.ctx, "INBOX")
		require.NoError(t, err)
		require.Equal(t, wb.srcUV, uv)
		return wb
	}
	// relocate is the composed relocation the mutation stages issue: MOVE
	// where it is advertised, COPY, STORE \Deleted, UID EXPUNGE otherwise.
	relocate := func(t *testing.T, wb *writeBundle) imapx.Placement {
		t.Helper()
		if wb.w.CanMove() {
			p, err := wb.w.Move(wb.ctx, uint32(wb.target), wb.archive)
			require.NoError(t, err)
			return p
		}
		p, err := wb.w.Copy(wb.ctx, uint32(wb.target), wb.archive)
		require.NoError(t, err)
		require.NoError(t, wb.w.StoreFlag(wb.ctx, uint32(wb.target), `\Deleted`, true))
		require.NoError(t, wb.w.ExpungeUID(wb.ctx, uint32(wb.target)))
		return p
	}
	requireOwnersMessageKept := func(t *testing.T, wb *writeBundle) {
		t.Helper()
		require.Contains(t, wb.user.UIDs("INBOX"), wb.owners, "the owner's \\Deleted message was expunged")
	}
	requireNoPlainExpunge := func(t *testing.T, wb *writeBundle) {
		t.Helper()
		require.True(t, slices.ContainsFunc(wb.rec.Lines(), regexp.MustCompile(`^\S+ UID EXPUNGE `+strconv.Itoa(int(wb.target))+`$`).MatchString),
			"the recorder reads the commands: %q", wb.rec.Lines())
		for _, line := range wb.rec.Lines() {
			require.NotRegexp(t, `(?i)^\S+ EXPUNGE`, line)
			require.NotRegexp(t, `(?i)^\S+ (UID )?MOVE`, line, "MOVE sent to a server that does not advertise it")
		}
	}

	for name, server := range servers {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := server(t)

			t.Run("Relocate", func(t *testing.T) {
				t.Parallel()
				wb := setupWrite(t, srv)
				p := relocate(t, wb)
				require.NotContains(t, wb.user.UIDs("INBOX"), wb.target)
				dest := wb.user.UIDs(wb.archive)
				require.Len(t, dest, 1)
				require.Equal(t, imapx.Placement{UIDValidity: wb.user.UIDValidity(wb.archive), UID: uint32(dest[0])}, p)
				requireOwnersMessageKept(t, wb)
				if name == "WithoutMove" {
					requireNoPlainExpunge(t, wb)
				}
			})

			t.Run("Copy", func(t *testing.T) {
				t.Parallel()
				wb := setupWrite(t, srv)
				p, err := wb.w.Copy(wb.ctx, uint32(wb.target), wb.archive)
				require.NoError(t, err)
				require.Contains(t, wb.user.UIDs("INBOX"), wb.target)
				dest := wb.user.UIDs(wb.archive)
				require.Len(t, dest, 1)
				require.Equal(t, uint32(dest[0]), p.UID)
			})

			t.Run("Delete", func(t *testing.T) {
				t.Parallel()
				wb := setupWrite(t, srv)
				require.NoError(t, wb.w.StoreFlag(wb.ctx, uint32(wb.target), `\Deleted`, true))
				require.NoError(t, wb.w.ExpungeUID(wb.ctx, uint32(wb.target)))
				require.Equal(t, []imap.UID{wb.owners}, wb.user.UIDs("INBOX"))
				for _, line := range wb.rec.Lines() {
					require.NotRegexp(t, `(?i)^\S+ EXPUNGE`, line)
				}
			})

			t.Run("MarkReadAndUnread", func(t *testing.T) {
				t.Parallel()
				wb := setupWrite(t, srv)
				require.NoError(t, wb.w.StoreFlag(wb.ctx, uint32(wb.target), `\Seen`, true))
				require.Contains(t, wb.user.Flags("INBOX", wb.target), imap.FlagSeen)
				// Idempotent on the wire: repeating it changes nothing.
				require.NoError(t, wb.w.StoreFlag(wb.ctx, uint32(wb.target), `\Seen`, true))
				require.NoError(t, wb.w.StoreFlag(wb.ctx, uint32(wb.target), `\Seen`, false))
				require.NotContains(t, wb.user.Flags("INBOX", wb.target), imap.FlagSeen)
				require.Contains(t, wb.user.Flags("INBOX", wb.owners), imap.FlagDeleted)
			})

			t.Run("DestinationMissing", func(t *testing.T) {
				t.Parallel()
				wb := setupWrite(t, srv)
				var err error
				if wb.w.CanMove() {
					_, err = wb.w.Move(wb.ctx, uint32(wb.target), "Nowhere")
				} else {
					_, err = wb.w.Copy(wb.ctx, uint32(wb.target), "Nowhere")
				}
				require.ErrorIs(t, err, imapx.ErrDestinationMissing)
				require.False(t, imapx.IsTransient(err))
				require.Contains(t, wb.user.UIDs("INBOX"), wb.target)
			})
		})
	}

	t.Run("NeitherMoveNorUIDPlusIsRefusedWithNothingSent", func(t *testing.T) {
		t.Parallel()
		wb := setupWrite(t, dovecot.Start(t, dovecot.WithCapability(capsNoMoveNoPlus)))
		require.False(t, wb.w.CanMove())
		require.False(t, wb.w.CanExpungeUID())
		_, err := wb.w.Move(wb.ctx, uint32(wb.target), wb.archive)
		require.ErrorIs(t, err, imapx.ErrNoSafeWay)
		require.ErrorIs(t, wb.w.ExpungeUID(wb.ctx, uint32(wb.target)), imapx.ErrNoSafeWay)
		for _, line := range wb.rec.Lines() {
			require.NotRegexp(t, `(?i)^\S+ (UID )?(MOVE|COPY|STORE|EXPUNGE)`, line)
		}
		require.Equal(t, []imap.UID{wb.target, wb.owners}, wb.user.UIDs("INBOX"))
	})

	t.Run("PlacementWhoseAnswerIsLostIsNotTransient", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		b.user.CreateFolder("Archive")
		target := b.user.Append("INBOX", message(1, 500), when)
		proxy := faultproxy.Start(t, b.srv.Addr())
		ep := b.endpoint(imapx.StartTLSWhenAvailable)
		var rec recorder
		ep.Dial = rec.Dial(proxy.Addr())
		w, err := imapx.OpenWriteConnection(b.ctx, ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
		require.NoError(t, err)
		t.Cleanup(w.Abandon)
		_, err = w.Select(b.ctx, "INBOX")
		require.NoError(t, err)
		// The COPY reaches the server; its answer never comes back.
		proxy.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 0)
		_, err = w.Copy(b.ctx, uint32(target), "Archive")
		var unknown *imapx.PlacementUnknownError
		require.ErrorAs(t, err, &unknown)
		require.False(t, imapx.IsTransient(err), "a placement whose answer was lost must not be retried")
		require.False(t, imapx.NotSent(err), "its bytes were written")
		require.False(t, w.Usable())
		// The server did carry it out: issuing it again would make a second
		// message.
		require.Len(t, b.user.UIDs("Archive"), 1)
	})
}

// TestReadSessionCannotReachTheWriteConnection: no method of a ReadSession
// takes or returns a WriteConnection, and no field of it holds one, so no
// holder of a read session can change a mailbox.
func TestReadSessionCannotReachTheWriteConnection(t *testing.T) {
	t.Parallel()
	write := reflect.TypeOf((*imapx.WriteConnection)(nil))
	read := reflect.TypeOf((*imapx.ReadSession)(nil))
	for i := range read.NumMethod() {
		m := read.Method(i).Type
		for j := range m.NumIn() {
			require.NotEqual(t, write, m.In(j), "ReadSession.%s takes a WriteConnection", read.Method(i).Name)
		}
		for j := range m.NumOut() {
			require.NotEqual(t, write, m.Out(j), "ReadSession.%s returns a WriteConnection", read.Method(i).Name)
		}
	}
	for i := range read.Elem().NumField() {
		f := read.Elem().Field(i).Type
		require.NotEqual(t, write, f)
		require.NotEqual(t, write.Elem(), f)
	}
}

// writeBreaker dials through to target and, while armed, ends the
// connection at the first write of a command matching pattern without
// writing a byte of it: a connection that breaks just as a command goes
// out. It counts the writes it broke.
type writeBreaker struct {
	pattern *regexp.Regexp
	rec     recorder

	mu    sync.Mutex
	armed bool
	broke int
}

func (b *writeBreaker) dial(target string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	next := b.rec.Dial(target)
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &breakingConn{Conn: c, b: b}, nil
	}
}

func (b *writeBreaker) trip(p []byte) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.armed || !b.pattern.Match(p) {
		return false
	}
	b.armed = false
	b.broke++
	return true
}

type breakingConn struct {
	net.Conn
	b *writeBreaker
}

func (c *breakingConn) Write(p []byte) (int, error) {
	if c.b.trip(p) {
		_ = c.Conn.Close()
		return 0, syscall.EPIPE
	}
	return c.Conn.Write(p)
}

// TestWriteConnectionThatEnded: a write connection the server or the
// network ended is found out before a change is written into it, and a
// command none of whose bytes left is reported as not sent — safe to issue
// again — rather than as a placement whose answer was lost.
func TestWriteConnectionThatEnded(t *testing.T) {
	t.Parallel()
	when, err := time.Parse(time.RFC3339, writeTestInternal)
	require.NoError(t, err)

	type endedBundle struct {
		*testBundle
		target imap.UID
		proxy  *faultproxy.Proxy
		brk    *writeBreaker
		w      *imapx.WriteConnection
	}
	// setupEnded opens a write connection over the plain listener (so the
	// commands can be read) through a fault proxy, with INBOX selected.
	setupEnded := func(t *testing.T, pattern string) *endedBundle {
		t.Helper()
		b := setup(t, nil)
		b.user.CreateFolder("Archive")
		eb := &endedBundle{testBundle: b, target: b.user.Append("INBOX", message(1, 500), when)}
		eb.proxy = faultproxy.Start(t, b.srv.Addr())
		eb.brk = &writeBreaker{pattern: regexp.MustCompile(pattern)}
		ep := b.endpoint(imapx.None)
		ep.Dial = eb.brk.dial(eb.proxy.Addr())
		w, err := imapx.OpenWriteConnection(b.ctx, ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
		require.NoError(t, err)
		t.Cleanup(w.Abandon)
		eb.w = w
		_, err = w.Select(b.ctx, "INBOX")
		require.NoError(t, err)
		require.True(t, w.CanMove())
		return eb
	}
	requireUnchanged := func(t *testing.T, eb *endedBundle) {
		t.Helper()
		require.Contains(t, eb.user.UIDs("INBOX"), eb.target)
		require.Empty(t, eb.user.UIDs("Archive"))
	}
	requireNotSent := func(t *testing.T, err error) {
		t.Helper()
		var unknown *imapx.PlacementUnknownError
		require.False(t, errors.As(err, &unknown), "reported as sent: %v", err)
		require.NotErrorIs(t, err, imapx.ErrNoSafeWay, "a connection that ended is not a server without MOVE")
		require.True(t, imapx.NotSent(err), "%v", err)
		require.True(t, imapx.IsTransient(err), "nothing reached the server: it may be issued again")
	}

	t.Run("ClosedByTheServerIsNotUsableAndNothingIsWritten", func(t *testing.T) {
		t.Parallel()
		eb := setupEnded(t, `^$`)
		eb.proxy.CutAll()
		poll.UntilTrue(t, 10*time.Second, "the reader saw the connection end, so it no longer counts as usable",
			func() bool { return !eb.w.Usable() })
		before := len(eb.brk.rec.Lines())
		for _, place := range []func() error{
			func() error { _, err := eb.w.Move(eb.ctx, uint32(eb.target), "Archive"); return err },
			func() error { _, err := eb.w.Copy(eb.ctx, uint32(eb.target), "Archive"); return err },
		} {
			requireNotSent(t, place())
		}
		require.Len(t, eb.brk.rec.Lines(), before, "a command was written into a connection that had ended")
		requireUnchanged(t, eb)
	})

	for _, command := range []string{"MOVE", "COPY"} {
		t.Run("WriteThatFailsAtItsFirstByteIsNotSent/"+command, func(t *testing.T) {
			t.Parallel()
			eb := setupEnded(t, `^\S+ UID `+command+` `)
			eb.brk.mu.Lock()
			eb.brk.armed = true
			eb.brk.mu.Unlock()
			var err error
			if command == "MOVE" {
				_, err = eb.w.Move(eb.ctx, uint32(eb.target), "Archive")
			} else {
				_, err = eb.w.Copy(eb.ctx, uint32(eb.target), "Archive")
			}
			require.Equal(t, 1, eb.brk.broke)
			requireNotSent(t, err)
			require.False(t, eb.w.Usable())
			requireUnchanged(t, eb)
		})
	}

	t.Run("NoopFindsAConnectionThatStoppedAnswering", func(t *testing.T) {
		t.Parallel()
		eb := setupEnded(t, `^$`)
		require.NoError(t, eb.w.Noop(eb.ctx), "a connection that answers passes")
		require.True(t, eb.w.Usable())
		require.Less(t, eb.w.IdleFor(), stallTimeout)
		// The network goes silent without a word: the connection still
		// looks usable, and only a command finds out.
		eb.proxy.StallAfter(faultproxy.Existing, faultproxy.Both, 0)
		require.True(t, eb.w.Usable())
		start := time.Now()
		err := eb.w.Noop(eb.ctx)
		require.Error(t, err)
		require.True(t, imapx.IsTransient(err))
		require.False(t, eb.w.Usable())
		require.Less(t, time.Since(start), stallTimeout+5*time.Second, "NOOP waits one bounded command, not longer")
		noops := 0
		for _, line := range eb.brk.rec.Lines() {
			require.NotRegexp(t, `(?i)^\S+ (UID )?(MOVE|COPY|STORE|EXPUNGE)`, line)
			if regexp.MustCompile(`^\S+ NOOP$`).MatchString(line) {
				noops++
			}
		}
		require.Equal(t, 2, noops)
		requireUnchanged(t, eb)
	})
}
