package mailsession_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailsession"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
)

func TestMain(m *testing.M) {
	code := m.Run()
	dovecot.StopShared()
	cyrus.StopShared()
	os.Exit(code)
}

// fastBudgets are the default budgets with short waits, so a test spends
// its time on the server rather than in backoff.
func fastBudgets() map[resilience.DependencyClass]resilience.Budget {
	budgets := resilience.DefaultBudgets()
	for class, b := range budgets {
		b.BaseDelay, b.MaxDelay = 10*time.Millisecond, 50*time.Millisecond
		budgets[class] = b
	}
	return budgets
}

type testBundle struct {
	ctx      context.Context
	srv      *dovecot.Server
	user     *dovecot.User
	registry *resilience.Registry
	logs     *capture.Buffer
	rec      *wiretap.Recorder
	// passwordCalls counts how often the endpoint's secret was resolved.
	passwordCalls int
}

func setup(t *testing.T, srv *dovecot.Server, budgets map[resilience.DependencyClass]resilience.Budget) *testBundle {
	t.Helper()
	if srv == nil {
		srv = dovecot.Shared(t)
	}
	if budgets == nil {
		budgets = fastBudgets()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	logs := &capture.Buffer{}
	reg, err := outbound.NewRegistry(budgets, logs.Logger(), nil)
	require.NoError(t, err)
	return &testBundle{ctx: ctx, srv: srv, user: srv.NewUser(), registry: reg, logs: logs, rec: &wiretap.Recorder{}}
}

// endpoint reaches the user over the plaintext listener (so the recorder
// reads every command) through target when it is not empty.
func (b *testBundle) endpoint(t *testing.T, target string) imapx.Endpoint {
	t.Helper()
	host, portText, err := net.SplitHostPort(b.srv.Addr())
	require.NoError(t, err)
	port, err := strconv.Atoi(portText)
	require.NoError(t, err)
	password := b.user.Password()
	return imapx.Endpoint{
		AccountID: "acct",
		Host:      host,
		Port:      port,
		Security:  imapx.None,
		Username:  b.user.Name(),
		Password: func(context.Context) ([]byte, error) {
			b.passwordCalls++
			return []byte(password), nil
		},
		AllowInsecureConnection:       true,
		AllowClearTextOverUnencrypted: true,
		Dial:                          b.rec.Dial(target),
	}
}

func opener(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
	return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
}

func (b *testBundle) open(t *testing.T, instance string, ep imapx.Endpoint) *mailsession.Session {
	t.Helper()
	s, err := mailsession.Open(b.ctx, b.registry, instance, "inbox", ep, opener)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// seed appends n messages of about size bytes to INBOX and returns their
// UIDs and contents.
func (b *testBundle) seed(n, size int) ([]uint32, map[uint32][]byte) {
	uids := make([]uint32, n)
	raws := make(map[uint32][]byte, n)
	for i := range n {
		raw := message(i, size)
		uid := uint32(b.user.Append("INBOX", raw, time.Now()))
		uids[i], raws[uid] = uid, raw
	}
	return uids, raws
}

func (b *testBundle) requireUnseen(t *testing.T, uids []uint32) {
	t.Helper()
	for _, uid := range uids {
		require.NotContains(t, b.user.Flags("INBOX", imap.UID(uid)), imap.FlagSeen, "UID %d got \\Seen", uid)
	}
}

func message(i, size int) []byte {
	var buf bytes.Buffer
	fmt.Fprintf(&buf, "From: Sender %d <sender%d@example.test>\r\nTo: rcpt@example.test\r\nSubject: Message %d\r\n\r\n", i, i, i)
	line := fmt.Sprintf("line of message %d, padding the body.\r\n", i)
	for buf.Len() < size {
		buf.WriteString(line)
	}
	return buf.Bytes()
}

// TestFetchRecoversReadOnlyAfterACut cuts the connection in the middle of a
// body stream. The retrieval pipeline's next attempt re-establishes the
// session — a new connection, the secret resolved again, the folder
// re-examined read-only — and asks only for the messages not yet
// delivered: every message arrives exactly once, nothing on the server
// changes, and nothing but read-only commands was sent on either
// connection.
func TestFetchRecoversReadOnlyAfterACut(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	uids, raws := b.seed(200, 5_000)
	p := faultproxy.Start(t, b.srv.Addr())
	s := b.open(t, "acct", b.endpoint(t, p.Addr()))
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	require.Equal(t, 1, b.passwordCalls)

	p.CutAfter(faultproxy.Existing, faultproxy.ServerToClient, 300_000) // ~60 of ~1 MB
	seen := map[uint32]int{}
	var order []uint32
	err = s.FetchBodies(b.ctx, uids, 1<<20, func(body imapx.Body) error {
		seen[body.UID]++
		order = append(order, body.UID)
		require.True(t, bytes.Equal(raws[body.UID], body.Raw), "UID %d", body.UID)
		return nil
	})
	require.NoError(t, err)
	require.EqualValues(t, 1, p.Stats().Cut, "the proxy cut the connection")
	require.Len(t, seen, len(uids))
	for _, u := range uids {
		require.Equal(t, 1, seen[u], "UID %d delivered once", u)
	}
	require.Equal(t, 1, s.Recoveries())
	require.Equal(t, 2, b.passwordCalls, "the recovery resolved the secret again")
	b.requireUnseen(t, uids)

	wire := b.rec.String()
	wiretap.RequireReadOnly(t, b.rec)
	require.Equal(t, 2, strings.Count(wire, "EXAMINE INBOX"), "the recovery re-examined the folder")
	// The retried fetch asked only for what was not delivered.
	fetches := regexp.MustCompile(`UID FETCH ([0-9:,]+) `).FindAllStringSubmatch(wire, -1)
	require.Len(t, fetches, 2)
	require.NotEqual(t, fetches[0][1], fetches[1][1])
	require.Contains(t, b.logs.String(), `"msg":"outbound call failed; retry scheduled"`)
}

// TestCallerFailureIsNotRetried: an error of the caller's callback ends the
// fetch at once and is not repeated by the pipeline.
func TestCallerFailureIsNotRetried(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	uids, _ := b.seed(5, 1_000)
	s := b.open(t, "acct", b.endpoint(t, ""))
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	boom := fmt.Errorf("the database refused the write")
	calls := 0
	err = s.FetchBodies(b.ctx, uids, 1<<20, func(imapx.Body) error {
		calls++
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.Equal(t, 1, calls)
	require.Zero(t, s.Recoveries())
	require.Equal(t, 1, strings.Count(b.rec.String(), "UID FETCH"))
	// The connection is still in step: the next read needs no recovery.
	_, err = s.SearchUIDs(b.ctx, 0, time.Time{})
	require.NoError(t, err)
	require.Zero(t, s.Recoveries())
}

// TestWrongPasswordIsTriedOnce: a rejected credential is terminal for the
// establishment pipeline — the server sees exactly one authentication —
// and reaches the caller as itself, not as an unavailable mailbox.
func TestWrongPasswordIsTriedOnce(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	ep := b.endpoint(t, "")
	ep.Password = func(context.Context) ([]byte, error) { return []byte("not-the-password"), nil }
	var opens atomic.Int32
	countingOpener := func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
		opens.Add(1)
		return opener(ctx, ep)
	}
	_, err := mailsession.Open(b.ctx, b.registry, "acct", resilience.OperationFolderDiscovery, ep, countingOpener)
	var authErr *imapx.AuthenticationError
	require.ErrorAs(t, err, &authErr)
	require.False(t, mailsession.IsMailboxUnavailable(err))
	// Open returns only when the pipeline is done with it: every attempt it
	// made has reached the opener, and the wire, by now.
	require.Equal(t, int32(1), opens.Load(), "the establishment pipeline made one attempt")
	require.Equal(t, 1, strings.Count(b.rec.String(), "AUTHENTICATE"), "one authentication was sent")
	line := b.srv.WaitLog("("+b.user.Name()+",", dovecot.LogWait)
	require.Contains(t, line, "mismatch")
	// Dovecot's login process sums up the one connection as it ends,
	// counting the authentications it received.
	line = b.srv.WaitLog("): user=<"+b.user.Name()+">,", dovecot.LogWait)
	require.Contains(t, line, "auth failed, 1 attempts")
	require.Equal(t, 1, strings.Count(b.srv.Log(), "("+b.user.Name()+","), "Dovecot saw one authentication")
	require.NotContains(t, b.logs.String(), "retry scheduled")
}

// TestAuthenticationRefusalsAreTriedOnce: a refusal raised inside the SASL
// exchange — the server refusing the credential there, or the client
// breaking the exchange off — is terminal for the establishment pipeline
// like a wrong password: one connection, and it reaches the caller as
// itself. A connection lost during AUTHENTICATE with nothing from the
// mechanism is still repeated.
//
// Dovecot answers a wrong SCRAM proof with a plain NO and never sends a
// malformed challenge or drops a connection after refusing a token, so a
// scripted server plays those cases; the SASLprep refusal runs against
// Dovecot.
func TestAuthenticationRefusalsAreTriedOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		script   imapscript.Script
		token    bool
		identity string
	}{
		{name: "SCRAM invalid-proof", script: imapscript.ScramServerFinal("e=invalid-proof"), identity: "MailAuthenticationRejected"},
		{name: "SCRAM unknown-user", script: imapscript.ScramServerFinal("e=unknown-user"), identity: "MailAuthenticationRejected"},
		{
			name:     "malformed challenge",
			script:   imapscript.ScramServerFirst(func(string) string { return imapscript.ScramFirst("not-the-client-nonce", 4096) }, ""),
			identity: imapx.AuthenticationExchangeIdentity,
		},
		{
			name:     "iteration count out of range",
			script:   imapscript.ScramServerFirst(func(n string) string { return imapscript.ScramFirst(n, 16) }, ""),
			identity: imapx.AuthenticationExchangeIdentity,
		},
		{name: "bearer refusal, then the connection drops", script: imapscript.BearerRefusalThenDrop(), token: true, identity: "MailAuthenticationRejected"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil, nil)
			srv := imapscript.Start(t, tc.script)
			ep := b.endpoint(t, srv.Addr())
			ep.PermittedMechanisms = []sasl.Mechanism{sasl.ScramSHA256}
			if tc.token {
				ep.PermittedMechanisms = []sasl.Mechanism{sasl.OAuthBearer}
				ep.Password = nil
				ep.Token = func(context.Context) ([]byte, error) { return []byte("a-token"), nil }
			}
			_, err := mailsession.Open(b.ctx, b.registry, "acct", resilience.OperationFolderDiscovery, ep, opener)
			require.Error(t, err)
			require.False(t, mailsession.IsMailboxUnavailable(err), "%v", err)
			require.False(t, imapx.IsTransient(err))
			id, _ := failure.Identity(err)
			require.Equal(t, tc.identity, id, "%v", err)
			require.Equal(t, 1, srv.Connections(), "one attempt")
			require.NotContains(t, b.logs.String(), "retry scheduled")
		})
	}

	t.Run("PasswordSASLprepRefuses", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		ep := b.endpoint(t, "")
		ep.PermittedMechanisms = []sasl.Mechanism{sasl.ScramSHA256}
		ep.Password = func(context.Context) ([]byte, error) {
			b.passwordCalls++
			return []byte("bell\u0007"), nil
		}
		_, err := mailsession.Open(b.ctx, b.registry, "acct", resilience.OperationFolderDiscovery, ep, opener)
		var exchErr *imapx.AuthenticationExchangeError
		require.ErrorAs(t, err, &exchErr)
		require.ErrorIs(t, err, sasl.ErrPasswordNotPreparable)
		require.False(t, mailsession.IsMailboxUnavailable(err))
		require.Equal(t, 1, strings.Count(b.rec.String(), "AUTHENTICATE"), "one authentication was sent")
		require.Equal(t, 1, b.passwordCalls, "the password was resolved once")
		require.NotContains(t, b.logs.String(), "retry scheduled")
	})

	t.Run("ConnectionLostDuringAuthenticateIsRepeated", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil, nil)
		srv := imapscript.Start(t, imapscript.DropDuringAuthenticate())
		ep := b.endpoint(t, srv.Addr())
		ep.PermittedMechanisms = []sasl.Mechanism{sasl.ScramSHA256}
		_, err := mailsession.Open(b.ctx, b.registry, "acct", resilience.OperationFolderDiscovery, ep, opener)
		require.True(t, mailsession.IsMailboxUnavailable(err), "%v", err)
		require.Equal(t, resilience.DefaultBudgets()[resilience.MailboxSessionEstablishment].MaxAttempts, srv.Connections())
	})
}

// TestUnreachableServerOpensOnlyItsAccountsCircuit: connections refused by
// one account's server are retried within the establishment budget, survive
// as MailboxUnavailable, and open that account's circuit — after which the
// account is refused at once without a connection — while another account
// on a healthy server keeps being served by the same registry.
func TestUnreachableServerOpensOnlyItsAccountsCircuit(t *testing.T) {
	t.Parallel()
	budgets := fastBudgets()
	est := budgets[resilience.MailboxSessionEstablishment]
	est.MaxAttempts, est.CircuitBreakerMinimumThroughput, est.CircuitBreakerBreakDuration = 2, 4, time.Minute
	budgets[resilience.MailboxSessionEstablishment] = est
	b := setup(t, nil, budgets)

	// A port nothing listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	dead := ln.Addr().String()
	require.NoError(t, ln.Close())
	down := b.endpoint(t, dead)

	dials := 0
	inner := down.Dial
	down.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		dials++
		return inner(ctx, network, addr)
	}
	_, err = mailsession.Open(b.ctx, b.registry, "down", resilience.OperationFolderDiscovery, down, opener)
	require.True(t, mailsession.IsMailboxUnavailable(err), "%v", err)
	require.Equal(t, 2, dials, "MaxAttempts connections")
	require.Contains(t, err.Error(), "[MailboxUnavailable]")
	_, err = mailsession.Open(b.ctx, b.registry, "down", resilience.OperationFolderDiscovery, down, opener)
	require.True(t, mailsession.IsMailboxUnavailable(err), "%v", err)
	require.Equal(t, 4, dials)

	// The circuit is open: the next establishment is refused at once.
	_, err = mailsession.Open(b.ctx, b.registry, "down", resilience.OperationFolderDiscovery, down, opener)
	require.True(t, mailsession.IsMailboxUnavailable(err), "%v", err)
	var unavailable *resilience.DependencyUnavailableError
	require.ErrorAs(t, err, &unavailable)
	require.Equal(t, resilience.RejectionCircuitOpen, unavailable.Rejection)
	require.Equal(t, 4, dials, "no connection while the circuit is open")
	require.Contains(t, b.logs.String(), "outbound circuit opened")

	// Another account is served through its own circuit.
	s := b.open(t, "up", b.endpoint(t, ""))
	_, err = s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
}

// TestStalledReadIsAbandonedAndRecovered: a server that stops answering in
// the middle of a fetch costs one attempt timeout; the next attempt
// re-establishes the session and completes.
func TestStalledReadIsAbandonedAndRecovered(t *testing.T) {
	t.Parallel()
	budgets := fastBudgets()
	ret := budgets[resilience.MailboxDataRetrieval]
	ret.AttemptTimeout = time.Second
	budgets[resilience.MailboxDataRetrieval] = ret
	b := setup(t, nil, budgets)
	uids, _ := b.seed(50, 5_000)
	p := faultproxy.Start(t, b.srv.Addr())
	s := b.open(t, "acct", b.endpoint(t, p.Addr()))
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	p.StallAfter(faultproxy.Existing, faultproxy.ServerToClient, 100_000)
	got := 0
	start := time.Now()
	err = s.FetchBodies(b.ctx, uids, 1<<20, func(imapx.Body) error { got++; return nil })
	require.NoError(t, err)
	require.Equal(t, len(uids), got)
	require.Equal(t, 1, s.Recoveries())
	require.GreaterOrEqual(t, time.Since(start), time.Second, "one attempt timeout was spent")
	b.requireUnseen(t, uids)
	wiretap.RequireReadOnly(t, b.rec)
}

// TestRecreatedFolderIsRefusedOnRecovery: a recovery that finds the folder
// under another UIDVALIDITY refuses it with ErrMailboxFolderRecreated,
// which is terminal: it is not retried and not reported as unavailable.
func TestRecreatedFolderIsRefusedOnRecovery(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	b.user.CreateFolder("Work")
	b.user.Append("Work", message(1, 500), time.Now())
	p := faultproxy.Start(t, b.srv.Addr())
	s := b.open(t, "acct", b.endpoint(t, p.Addr()))
	_, err := s.Examine(b.ctx, "Work")
	require.NoError(t, err)

	b.user.RecreateFolder("Work")
	p.CutAll()
	p.Heal()
	_, err = s.SearchUIDs(b.ctx, 0, time.Time{})
	require.ErrorIs(t, err, imapx.ErrMailboxFolderRecreated)
	require.False(t, mailsession.IsMailboxUnavailable(err))
	// Refused, not read: no search was sent on the recovered connection.
	wire := b.rec.String()
	require.Equal(t, 1, strings.Count(wire, "UID SEARCH"), "only the cut attempt searched")
}

// TestReconcileRecoversBothConnections: a reconciliation whose connections
// were both cut is retried by the retrieval pipeline on a re-established
// session — the main connection re-examines the folder read-only and the
// reconciliation connection is opened afresh — and answers as before.
func TestReconcileRecoversBothConnections(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	uids, _ := b.seed(30, 1_000)
	b.user.Expunge("INBOX", imap.UID(uids[3]), imap.UID(uids[7]))
	p := faultproxy.Start(t, b.srv.Addr())
	s := b.open(t, "acct", b.endpoint(t, p.Addr()))
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	before, err := s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)
	require.Equal(t, []uint32{uids[3], uids[7]}, before.Vanished)

	p.CutAll()
	after, err := s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)
	require.Equal(t, 1, s.Recoveries())
	require.Equal(t, before.Present, after.Present)
	require.Equal(t, before.Vanished, after.Vanished)
	b.requireUnseen(t, append(append([]uint32(nil), uids[:3]...), uids[8:]...))
	wiretap.RequireReadOnly(t, b.rec)
}

// TestReconcileSessionRecoversItsOneConnection: a session of
// imapx.OpenReconcileSession, cut in the middle of its work, is
// re-established by the retrieval pipeline on one new connection, where the
// folder is examined again; the answer is the same, every command was
// read-only, and the server saw one login per connection.
func TestReconcileSessionRecoversItsOneConnection(t *testing.T) {
	t.Parallel()
	b := setup(t, nil, nil)
	uids, _ := b.seed(10, 500)
	b.user.Expunge("INBOX", imap.UID(uids[2]))
	p := faultproxy.Start(t, b.srv.Addr())
	s, err := mailsession.Open(b.ctx, b.registry, "acct", "inbox", b.endpoint(t, p.Addr()),
		func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
			return imapx.OpenReconcileSession(ctx, ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
		})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	_, err = s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)
	before, err := s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)
	require.Equal(t, []uint32{uids[2]}, before.Vanished)

	p.CutAll()
	after, err := s.Reconcile(b.ctx, uids, 0)
	require.NoError(t, err)
	require.Equal(t, 1, s.Recoveries())
	require.Equal(t, before.Present, after.Present)
	require.Equal(t, before.Vanished, after.Vanished)
	require.NoError(t, s.Close())
	poll.Until(t, dovecot.LogWait, "Dovecot logged the logins before and after the cut", func() (bool, string) {
		got := strings.Count(b.srv.Log(), "Login: user=<"+b.user.Name()+">")
		return got >= 2, fmt.Sprintf("%d logins", got)
	})
	require.Equal(t, 2, strings.Count(b.srv.Log(), "Login: user=<"+b.user.Name()+">"), "one connection before the cut, one after")
	b.requireUnseen(t, append(uids[:2:2], uids[3:]...))
	wiretap.RequireReadOnly(t, b.rec)
}

// A session that opens only after its establishment attempt was abandoned
// is closed, not left connected with nobody to use it, and the pipeline's
// next attempt brings its own.
func TestSessionOfAnAbandonedAttemptIsClosed(t *testing.T) {
	t.Parallel()
	budgets := fastBudgets()
	e := budgets[resilience.MailboxSessionEstablishment]
	// Long enough that the second attempt's TLS login completes within it
	// on a loaded machine; the first attempt is abandoned by design.
	e.AttemptTimeout = 2 * time.Second
	budgets[resilience.MailboxSessionEstablishment] = e
	b := setup(t, nil, budgets)
	var opened []*imapx.ReadSession
	slow := func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
		rs, err := opener(context.WithoutCancel(ctx), ep)
		if err == nil {
			opened = append(opened, rs)
		}
		if len(opened) == 1 {
			<-ctx.Done() // the first one opens as its attempt is abandoned
		}
		return rs, err
	}
	s, err := mailsession.Open(b.ctx, b.registry, "acct", "inbox", b.endpoint(t, ""), slow)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	require.Len(t, opened, 2, "one abandoned attempt, then the one accepted")
	_, err = opened[0].Examine(b.ctx, "INBOX")
	require.Error(t, err, "the abandoned attempt's session was closed")
	_, err = s.Examine(b.ctx, "INBOX")
	require.NoError(t, err, "the accepted one serves")
}
