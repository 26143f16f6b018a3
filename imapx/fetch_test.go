package imapx_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
)

// seed writes n messages of the given sizes into folder and returns their
// UIDs and contents by UID.
func (b *testBundle) seed(folder string, sizes []int) ([]uint32, map[uint32][]byte) {
	b.t.Helper()
	msgs := make([]dovecot.SeedMessage, len(sizes))
	for i, size := range sizes {
		msgs[i] = dovecot.SeedMessage{Raw: message(i, size)}
	}
	uids := toUint32(b.user.SeedMaildir(folder, msgs))
	byUID := make(map[uint32][]byte, len(uids))
	for i, uid := range uids {
		byUID[uid] = msgs[i].Raw
	}
	return uids, byUID
}

// collect returns an fn for FetchBodies that copies every body it gets.
func collect(got *[]imapx.Body) func(imapx.Body) error {
	return func(body imapx.Body) error {
		body.Raw = bytes.Clone(body.Raw)
		*got = append(*got, body)
		return nil
	}
}

// TestFetchBodies: bytes identical to what was stored, one message per
// callback in increasing UID order, oversized ones reported, \Seen never set.
func TestFetchBodies(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	sizes := []int{200, 5_000, 70_000, 300_000, 1_000, 64 << 10}
	uids, want := b.seed("INBOX", sizes)
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	const maxBytes = 256 << 10
	var got []imapx.Body
	// Ask in reverse order: the server answers in its own (UID) order.
	reversed := slices.Clone(uids)
	slices.Reverse(reversed)
	require.NoError(t, s.FetchBodies(b.ctx, reversed, maxBytes, collect(&got)))
	require.Len(t, got, len(uids))
	for i, body := range got {
		require.Equal(t, uids[i], body.UID, "increasing UIDs")
		if len(want[body.UID]) > maxBytes {
			require.True(t, body.Exceeded, "UID %d is above maxBytes", body.UID)
			require.Nil(t, body.Raw)
			continue
		}
		require.False(t, body.Exceeded)
		require.True(t, bytes.Equal(want[body.UID], body.Raw), "UID %d differs", body.UID)
	}
	b.requireUnseen("INBOX", uids...)

	// A small maxBytes turns every message into an exceeded one, and the
	// stream still stays in step.
	got = nil
	require.NoError(t, s.FetchBodies(b.ctx, uids, 100, collect(&got)))
	require.Len(t, got, len(uids))
	for _, body := range got {
		require.True(t, body.Exceeded)
	}
	// Exactly maxBytes fits.
	got = nil
	require.NoError(t, s.FetchBodies(b.ctx, uids[:1], int64(len(want[uids[0]])), collect(&got)))
	require.False(t, got[0].Exceeded)
	require.Equal(t, want[uids[0]], got[0].Raw)

	b.requireUnseen("INBOX", uids...)
	md, err := s.FetchMetadata(b.ctx, uids)
	require.NoError(t, err)
	for _, m := range md {
		require.NotContains(t, m.Flags, string(imap.FlagSeen))
	}
}

// TestFetchBodiesOneAtATime: the callback runs before the next message is
// read, and the buffer it gets is reused.
func TestFetchBodiesOneAtATime(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, want := b.seed("INBOX", []int{4_000, 3_000, 2_000, 1_000})
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	var prev []byte
	var seen []uint32
	require.NoError(t, s.FetchBodies(b.ctx, uids, 1<<20, func(body imapx.Body) error {
		require.True(t, bytes.Equal(want[body.UID], body.Raw))
		if prev != nil {
			require.Same(t, &prev[0], &body.Raw[0], "the buffer is reused")
		}
		prev = body.Raw
		seen = append(seen, body.UID)
		return nil
	}))
	require.Equal(t, uids, seen)
}

// TestFetchBodiesCallbackError: fn's error ends the fetch, comes back as is,
// and the connection stays usable.
func TestFetchBodiesCallbackError(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, _ := b.seed("INBOX", slices.Repeat([]int{20_000}, 50))
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	stop := errors.New("stop here")
	calls := 0
	err = s.FetchBodies(b.ctx, uids, 1<<20, func(imapx.Body) error {
		calls++
		if calls == 2 {
			return stop
		}
		return nil
	})
	require.Same(t, stop, err)
	require.Equal(t, 2, calls)
	md, err := s.FetchMetadata(b.ctx, uids[:3])
	require.NoError(t, err)
	require.Len(t, md, 3)
}

// TestFetchBodiesCutAndRecover cuts the connection in the middle of a body
// fetch: the failure is transient, Recover re-examines read-only and the
// fetch continues after the last delivered UID. The whole conversation is
// recorded and checked for anything that could change the mailbox.
func TestFetchBodiesCutAndRecover(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, want := b.seed("INBOX", slices.Repeat([]int{5_000}, 200))
	p := faultproxy.Start(t, b.srv.Addr())
	var rec recorder
	ep := b.endpoint(imapx.None) // plaintext, so the recorder reads commands
	ep.Dial = rec.Dial(p.Addr())
	s := b.open(ep, imapx.SessionOptions{})
	before, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 300_000) // ~60 of ~1 MB
	var got []imapx.Body
	err = s.FetchBodies(b.ctx, uids, 1<<20, collect(&got))
	require.Error(t, err)
	require.True(t, imapx.IsTransient(err), "%v", err)
	var trErr *imapx.TransportError
	require.ErrorAs(t, err, &trErr)
	require.NotEmpty(t, got)
	require.Less(t, len(got), len(uids))
	t.Logf("cut after %d of %d messages: %v", len(got), len(uids), err)

	// The broken connection fails fast until Recover.
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.True(t, imapx.IsTransient(err))

	recoveredAt := len(rec.String())
	after, err := s.Recover(b.ctx)
	require.NoError(t, err)
	require.Equal(t, before, after)
	rest, err := s.SearchUIDs(b.ctx, got[len(got)-1].UID, timeZero)
	require.NoError(t, err)
	require.NoError(t, s.FetchBodies(b.ctx, rest, 1<<20, collect(&got)))

	require.Len(t, got, len(uids))
	for i, body := range got {
		require.Equal(t, uids[i], body.UID)
		require.True(t, bytes.Equal(want[body.UID], body.Raw))
	}
	b.requireUnseen("INBOX", uids...)

	names := requireReadOnlyWire(t, &rec)
	require.Contains(t, names, "EXAMINE")
	require.Contains(t, rec.String()[recoveredAt:], "EXAMINE INBOX", "Recover re-examined")
	require.Contains(t, rec.String()[recoveredAt:], "BODY.PEEK[]")
}

// TestRecoverAfterFolderRecreated: a recovered connection that finds another
// UIDVALIDITY refuses the folder.
func TestRecoverAfterFolderRecreated(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const folder = "Zeta Secret Project"
	b.user.CreateFolder(folder)
	uids, _ := b.seed(folder, []int{100, 100})
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	before, err := s.Examine(b.ctx, folder)
	require.NoError(t, err)

	newValidity := b.user.RecreateFolder(folder)
	after, err := s.Recover(b.ctx)
	require.ErrorIs(t, err, imapx.ErrMailboxFolderRecreated)
	require.False(t, imapx.IsTransient(err))
	requireNoPersonalData(t, err, "Zeta", "Secret", b.user.Name())
	require.Equal(t, newValidity, after.UIDValidity)
	require.NotEqual(t, before.UIDValidity, after.UIDValidity)

	// Nothing of the recreated folder is searched or fetched...
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.ErrorIs(t, err, imapx.ErrMailboxFolderRecreated)
	_, err = s.FetchMetadata(b.ctx, uids)
	require.ErrorIs(t, err, imapx.ErrMailboxFolderRecreated)
	require.ErrorIs(t, s.FetchBodies(b.ctx, uids, 1<<20, func(imapx.Body) error { return nil }), imapx.ErrMailboxFolderRecreated)
	// ...until it is examined as what it now is.
	st, err := s.Examine(b.ctx, folder)
	require.NoError(t, err)
	require.Equal(t, newValidity, st.UIDValidity)
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.NoError(t, err)
}

// TestReadOnlyOnTheWire runs every operation over a plaintext connection and
// checks each byte the session sent: EXAMINE only, BODY.PEEK only, nothing
// that stores, copies, moves, expunges or appends.
func TestReadOnlyOnTheWire(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids, _ := b.seed("INBOX", []int{1_000, 50_000, 2_000})
	var rec recorder
	ep := b.endpoint(imapx.None)
	ep.Dial = rec.Dial("")
	s, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
	require.NoError(t, err)
	_, err = s.ListFolders(b.ctx)
	require.NoError(t, err)
	for _, folder := range []string{"Sent", "INBOX"} {
		_, err = s.Examine(b.ctx, folder)
		require.NoError(t, err)
	}
	found, err := s.SearchUIDs(b.ctx, 0, time.Now().AddDate(0, 0, -1))
	require.NoError(t, err)
	require.Equal(t, uids, found)
	_, err = s.FetchMetadata(b.ctx, uids)
	require.NoError(t, err)
	require.NoError(t, s.FetchBodies(b.ctx, uids, 10_000, func(imapx.Body) error { return nil }))
	_, err = s.Recover(b.ctx)
	require.NoError(t, err)
	require.NoError(t, s.FetchBodies(b.ctx, uids, 1<<20, func(imapx.Body) error { return nil }))
	// The reconciliation questions, over the same connection and over a
	// reconciliation session's own: ENABLE QRESYNC there, EXAMINE, UID
	// FETCH of FLAGS UID MODSEQ with and without CHANGEDSINCE, UID SEARCH.
	reconcile := func(s *imapx.ReadSession) {
		ans, err := s.Reconcile(b.ctx, uids, 0)
		require.NoError(t, err)
		require.Equal(t, uids, ans.Present)
		_, err = s.Reconcile(b.ctx, uids, ans.HighestModSeq)
		require.NoError(t, err)
		_, err = s.ExistingUIDs(b.ctx, uids)
		require.NoError(t, err)
		require.NoError(t, s.Close())
	}
	reconcile(s)
	rs, err := imapx.OpenReconcileSession(b.ctx, ep, imapx.SessionOptions{})
	require.NoError(t, err)
	_, err = rs.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	reconcile(rs)

	names := requireReadOnlyWire(t, &rec)
	for _, want := range []string{"AUTHENTICATE", "NAMESPACE", "LIST", "EXAMINE", "UID SEARCH", "UID FETCH", "ENABLE", "LOGOUT"} {
		require.Contains(t, names, want)
	}
	lines := rec.Lines()
	enable := slices.Index(lines, "R1 ENABLE QRESYNC")
	require.GreaterOrEqual(t, enable, 0)
	require.Less(t, enable, slices.IndexFunc(lines, func(l string) bool {
		return strings.HasPrefix(l, "R2 EXAMINE ")
	}), "ENABLE QRESYNC before the reconciliation connection's EXAMINE")
	require.NotContains(t, rec.String(), "(FLAGS UID MODSEQ BODY")
	require.Contains(t, rec.String(), "BODY.PEEK[]")
	b.requireUnseen("INBOX", uids...)
	t.Logf("commands: %v", names)
}

// TestCommandTimeout: a server that stops answering costs one
// CommandTimeout and a transient error; Recover then works.
func TestCommandTimeout(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := faultproxy.Start(t, b.srv.TLSAddr())
	ep := b.endpoint(imapx.TLSOnConnect)
	ep.Dial = (&recorder{}).Dial(p.Addr())
	s := b.open(ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	p.StallAll()
	start := time.Now()
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	elapsed := time.Since(start)
	require.True(t, imapx.IsTransient(err), "%v", err)
	require.Contains(t, err.Error(), "timed out")
	require.Less(t, elapsed, 2*stallTimeout, "one timeout, not the default")
	require.GreaterOrEqual(t, elapsed, stallTimeout)

	// Establishment is bounded too.
	start = time.Now()
	_, err = s.Recover(b.ctx)
	require.True(t, imapx.IsTransient(err), "%v", err)
	require.Less(t, time.Since(start), 2*stallTimeout)
	// Without a connection every operation fails fast and transiently.
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.True(t, imapx.IsTransient(err), "%v", err)
	_, err = s.FetchMetadata(b.ctx, []uint32{1})
	require.True(t, imapx.IsTransient(err), "%v", err)
	require.True(t, imapx.IsTransient(s.FetchBodies(b.ctx, []uint32{1}, 1<<20, func(imapx.Body) error { return nil })))
	_, err = s.ListFolders(b.ctx)
	require.True(t, imapx.IsTransient(err), "%v", err)

	p.Heal()
	_, err = s.Recover(b.ctx)
	require.NoError(t, err)
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.NoError(t, err)
}

// TestContextCancel: the caller's cancellation is neither transient nor
// terminal; it comes back as the context's error.
func TestContextCancel(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	p := faultproxy.Start(t, b.srv.TLSAddr())
	ep := b.endpoint(imapx.TLSOnConnect)
	ep.Dial = (&recorder{}).Dial(p.Addr())
	s := b.open(ep, imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	p.StallAll()
	ctx, cancel := context.WithTimeout(b.ctx, 200*time.Millisecond)
	defer cancel()
	_, err = s.SearchUIDs(ctx, 0, timeZero)
	require.ErrorIs(t, err, context.DeadlineExceeded)
	require.False(t, imapx.IsTransient(err))

	ctx, cancel = context.WithCancel(b.ctx)
	cancel()
	_, err = imapx.OpenReadSession(ctx, b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	require.ErrorIs(t, err, context.Canceled)
	require.False(t, imapx.IsTransient(err))
}

// TestClose: LOGOUT on a healthy connection, none on a broken one.
func TestClose(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	var rec recorder
	ep := b.endpoint(imapx.None)
	ep.Dial = rec.Dial("")
	s, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.Contains(t, rec.String(), "LOGOUT")
	require.NoError(t, s.Close(), "a second Close is a no-op")

	p := faultproxy.Start(t, b.srv.Addr())
	var rec2 recorder
	ep.Dial = rec2.Dial(p.Addr())
	s, err = imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
	require.NoError(t, err)
	_, err = s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	p.CutAll()
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.True(t, imapx.IsTransient(err))
	start := time.Now()
	require.NoError(t, s.Close())
	require.Less(t, time.Since(start), time.Second)
	require.NotContains(t, rec2.String(), "LOGOUT")
}

// TestErrorsCarryNoPersonalData gathers the errors of several failures and
// checks that none names the folder, the user or the password.
func TestErrorsCarryNoPersonalData(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	const folder = "Zeta Secret Project"
	b.user.CreateFolder(folder)
	var errs []error

	ep := b.endpoint(imapx.TLSOnConnect)
	bad := ep
	bad.Password = func(context.Context) ([]byte, error) { return []byte("wrong-" + b.user.Password()), nil }
	_, err := imapx.OpenReadSession(b.ctx, bad, imapx.SessionOptions{})
	errs = append(errs, err)

	p := faultproxy.Start(t, b.srv.TLSAddr())
	ep.Dial = (&recorder{}).Dial(p.Addr())
	s := b.open(ep, imapx.SessionOptions{CommandTimeout: stallTimeout})
	_, err = s.Examine(b.ctx, folder+"-missing")
	errs = append(errs, err)
	_, err = s.Examine(b.ctx, folder)
	require.NoError(t, err)
	p.CutAll()
	_, err = s.FetchMetadata(b.ctx, []uint32{1})
	errs = append(errs, err)
	_, err = s.Recover(b.ctx)
	require.NoError(t, err)
	p.StallAll()
	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	errs = append(errs, err)
	p.Heal()
	b.user.RecreateFolder(folder)
	_, err = s.Recover(b.ctx)
	errs = append(errs, err)

	for _, err := range errs {
		require.Error(t, err)
		requireNoPersonalData(t, err, "Zeta", "Secret", "Project", b.user.Name(), b.user.Password())
		t.Log(err)
	}
}

func requireNoPersonalData(t testing.TB, err error, words ...string) {
	t.Helper()
	text := fmt.Sprintf("%v %+v %s", err, err, err.Error())
	for _, w := range words {
		require.NotContains(t, strings.ToLower(text), strings.ToLower(w))
	}
}

// BenchmarkFetchBodies streams 2 000 messages of mixed sizes (median ~10 KB,
// every tenth 100 KB, every hundredth 1 MB) in one FetchBodies over TLS and
// over plaintext.
func BenchmarkFetchBodies(b *testing.B) {
	srv := dovecot.Start(b)
	tb := setup(b, srv)
	rng := rand.New(rand.NewPCG(1, 2))
	sizes := make([]int, 2000)
	total := 0
	for i := range sizes {
		switch {
		case i%100 == 99:
			sizes[i] = 1 << 20
		case i%10 == 9:
			sizes[i] = 100 << 10
		default:
			sizes[i] = 2_000 + rng.IntN(18_000)
		}
		total += sizes[i]
	}
	b.Logf("corpus: %d messages, %.1f MB", len(sizes), float64(total)/1e6)
	// SeedMaildir in chunks keeps its UID wait short.
	var uids []uint32
	for start := 0; start < len(sizes); start += 500 {
		u, _ := tb.seed("INBOX", sizes[start:start+500])
		uids = append(uids, u...)
	}
	for _, sec := range []imapx.ConnectionSecurity{imapx.TLSOnConnect, imapx.None} {
		b.Run(string(sec), func(b *testing.B) {
			s := tb.open(tb.endpoint(sec), imapx.SessionOptions{})
			_, err := s.Examine(tb.ctx, "INBOX")
			require.NoError(b, err)
			var n int
			var bytesRead int64
			for b.Loop() {
				require.NoError(b, s.FetchBodies(tb.ctx, uids, 2<<20, func(body imapx.Body) error {
					n++
					bytesRead += int64(len(body.Raw))
					return nil
				}))
			}
			secs := b.Elapsed().Seconds()
			b.ReportMetric(float64(n)/secs, "msgs/s")
			b.ReportMetric(float64(bytesRead)/secs/1e6, "MB/s")
			b.ReportMetric(0, "ns/op")
		})
	}
}

// An empty message is delivered as an empty message, not as a missing one.
func TestFetchBodiesEmptyMessage(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	uids := toUint32(b.user.SeedMaildir("INBOX", []dovecot.SeedMessage{{Raw: []byte{}}, {Raw: message(1, 300)}}))
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	var got []imapx.Body
	require.NoError(t, s.FetchBodies(b.ctx, uids, 1<<20, func(body imapx.Body) error {
		got = append(got, imapx.Body{UID: body.UID, Raw: bytes.Clone(body.Raw), Exceeded: body.Exceeded})
		return nil
	}))
	require.Len(t, got, 2)
	require.Equal(t, uids[0], got[0].UID)
	require.False(t, got[0].Exceeded)
	require.NotNil(t, got[0].Raw, "an empty message has content: none")
	require.Empty(t, got[0].Raw)
}
