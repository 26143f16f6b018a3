package imapx

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
	"github.com/mailfathom/mailfathom/internal/sasl"
)

// fakeServer is a scripted IMAP server on the far end of a net.Pipe, for
// what Dovecot cannot be made to do. net.Pipe delivers each Write as one
// chunk, which makes "two responses in one read" deterministic.
type fakeServer struct {
	t    *testing.T
	conn net.Conn
	br   *bufio.Reader

	mu       sync.Mutex
	received []string
}

// send writes lines, each followed by CRLF, in one Write.
func (s *fakeServer) send(lines ...string) {
	_, _ = io.WriteString(s.conn, strings.Join(lines, "\r\n")+"\r\n")
}

// next reads one command line; "" when the client is gone.
func (s *fakeServer) next() string {
	line, err := s.br.ReadString('\n')
	if err != nil {
		return ""
	}
	line = strings.TrimRight(line, "\r\n")
	s.mu.Lock()
	s.received = append(s.received, line)
	s.mu.Unlock()
	return line
}

func (s *fakeServer) lines() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.received...)
}

// tagged splits "T1 LOGIN ..." into "T1" and "LOGIN ...".
func tagged(line string) (tag, rest string) {
	tag, rest, _ = strings.Cut(line, " ")
	return tag, rest
}

// fakeEndpoint returns an endpoint whose Dial connects to a fakeServer
// running script, and the server.
func fakeEndpoint(t *testing.T, sec ConnectionSecurity, script func(s *fakeServer)) (Endpoint, *fakeServer) {
	client, server := net.Pipe()
	s := &fakeServer{t: t, conn: server, br: bufio.NewReader(server)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		script(s)
		// Answer whatever else comes (CAPABILITY after login, LOGOUT) until
		// the client goes away.
		for line := s.next(); line != ""; line = s.next() {
			tag, cmd := tagged(line)
			switch strings.ToUpper(cmd) {
			case "CAPABILITY":
				s.send("* CAPABILITY IMAP4rev1", tag+" OK done")
			case "LOGOUT":
				s.send("* BYE bye", tag+" OK done")
				server.Close()
				return
			default:
				s.send(tag + " BAD unexpected")
			}
		}
	}()
	t.Cleanup(func() {
		client.Close()
		server.Close()
		<-done
	})
	used := false
	return Endpoint{
		Host: "fake.invalid", Port: 143, Security: sec, Username: "someone@example.test",
		AllowInsecureConnection:       true,
		AllowClearTextOverUnencrypted: true,
		Password:                      func(context.Context) ([]byte, error) { return []byte("secret pw"), nil },
		Dial: func(context.Context, string, string) (net.Conn, error) {
			if used {
				return nil, errors.New("the fake server takes one connection")
			}
			used = true
			return client, nil
		},
	}, s
}

func fakeOpen(t *testing.T, ep Endpoint) (*ReadSession, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := OpenReadSession(ctx, ep, SessionOptions{CommandTimeout: 5 * time.Second})
	if err == nil {
		t.Cleanup(func() { _ = s.Close() })
	}
	return s, err
}

// TestStartTLSInjectionRefused: bytes the server sends after its STARTTLS OK
// and before the handshake are refused, not read as if they came over TLS.
func TestStartTLSInjectionRefused(t *testing.T) {
	ep, srv := fakeEndpoint(t, StartTLSRequired, func(s *fakeServer) {
		s.send("* OK [CAPABILITY IMAP4rev1 STARTTLS AUTH=PLAIN] ready")
		tag, _ := tagged(s.next())
		s.send(tag+" OK begin TLS", "* OK [CAPABILITY IMAP4rev1 AUTH=PLAIN] injected")
	})
	_, err := fakeOpen(t, ep)
	require.ErrorIs(t, err, ErrProtocolViolation)
	require.False(t, IsTransient(err))
	require.Equal(t, []string{"M2 STARTTLS"}, srv.lines())
}

// TestStartTLSCapabilityCommand: a greeting without capabilities makes the
// client ask for them before deciding; a refused STARTTLS is terminal.
func TestStartTLSCapabilityCommand(t *testing.T) {
	ep, srv := fakeEndpoint(t, StartTLSWhenAvailable, func(s *fakeServer) {
		s.send("* OK ready")
		tag, _ := tagged(s.next())
		s.send("* CAPABILITY IMAP4rev1 STARTTLS", tag+" OK done")
		tag, _ = tagged(s.next())
		s.send(tag + " NO [UNAVAILABLE] not now, private text")
	})
	_, err := fakeOpen(t, ep)
	var cmdErr *CommandError
	require.ErrorAs(t, err, &cmdErr)
	require.Equal(t, CommandError{Command: "STARTTLS", Status: "NO", Code: "UNAVAILABLE"}, *cmdErr)
	require.NotContains(t, err.Error(), "private")
	require.Equal(t, []string{"M1 CAPABILITY", "M2 STARTTLS"}, srv.lines())
}

// TestPreauth: PREAUTH skips authentication, except where STARTTLS is
// required, which PREAUTH makes impossible.
func TestPreauth(t *testing.T) {
	preauth := func(s *fakeServer) { s.send("* PREAUTH [CAPABILITY IMAP4rev1 STARTTLS] welcome") }
	ep, _ := fakeEndpoint(t, StartTLSRequired, preauth)
	_, err := fakeOpen(t, ep)
	require.ErrorIs(t, err, ErrStartTLSUnavailable)

	ep, srv := fakeEndpoint(t, None, preauth)
	calls := 0
	ep.Password = func(context.Context) ([]byte, error) { calls++; return nil, nil }
	s, err := fakeOpen(t, ep)
	require.NoError(t, err)
	require.Zero(t, calls)
	require.NoError(t, s.Close())
	require.Equal(t, []string{"T1 LOGOUT"}, srv.lines())
}

// TestGreetingBye: a server refusing the connection is transient.
func TestGreetingBye(t *testing.T) {
	ep, _ := fakeEndpoint(t, None, func(s *fakeServer) { s.send("* BYE too many connections from your address") })
	_, err := fakeOpen(t, ep)
	require.True(t, IsTransient(err), "%v", err)
	require.NotContains(t, err.Error(), "address")
}

// TestLoginCommand: without AUTH=PLAIN the LOGIN command is used; its
// rejection is an *AuthenticationError; LOGINDISABLED sends no credential.
func TestLoginCommand(t *testing.T) {
	login := func(answer string) func(s *fakeServer) {
		return func(s *fakeServer) {
			s.send("* OK [CAPABILITY IMAP4rev1 AUTH=SCRAM-SHA-256] ready")
			tag, _ := tagged(s.next())
			s.send(tag + " " + answer)
		}
	}
	ep, srv := fakeEndpoint(t, None, login("OK [CAPABILITY IMAP4rev1] logged in"))
	_, err := fakeOpen(t, ep)
	require.NoError(t, err)
	require.Equal(t, `T1 LOGIN "someone@example.test" "secret pw"`, srv.lines()[0])

	ep, _ = fakeEndpoint(t, None, login("NO [AUTHENTICATIONFAILED] no such user someone@example.test"))
	_, err = fakeOpen(t, ep)
	var authErr *AuthenticationError
	require.ErrorAs(t, err, &authErr)
	require.Equal(t, AuthenticationError{Mechanism: "LOGIN", Code: "AUTHENTICATIONFAILED"}, *authErr)
	require.NotContains(t, err.Error(), "someone")

	ep, srv = fakeEndpoint(t, None, func(s *fakeServer) {
		s.send("* OK [CAPABILITY IMAP4rev1 STARTTLS LOGINDISABLED] ready")
	})
	_, err = fakeOpen(t, ep)
	require.ErrorIs(t, err, ErrLoginDisabled)
	require.Empty(t, srv.lines(), "no credential was sent")
}

func TestExpandUIDs(t *testing.T) {
	set := imap.UIDSet{{Start: 7, Stop: 9}, {Start: 3, Stop: 3}, {Start: 12, Stop: 10}, {Start: 8, Stop: 8}}
	got, err := expandUIDs(set, 0)
	require.NoError(t, err)
	require.Equal(t, []uint32{3, 7, 8, 9, 10, 11, 12}, got)
	got, err = expandUIDs(set, 8)
	require.NoError(t, err)
	require.Equal(t, []uint32{9, 10, 11, 12}, got)
	got, err = expandUIDs(nil, 0)
	require.NoError(t, err)
	require.Empty(t, got)

	_, err = expandUIDs(imap.UIDSet{{Start: 5, Stop: 0}}, 0)
	require.ErrorIs(t, err, ErrProtocolViolation)
	_, err = expandUIDs(imap.UIDSet{{Start: 1, Stop: 4_000_000_000}}, 0)
	require.ErrorIs(t, err, ErrProtocolViolation, "refused before allocating")
	_, err = expandUIDs(imap.SeqSet{{Start: 1, Stop: 2}}, 0)
	require.ErrorIs(t, err, ErrProtocolViolation)
}

func TestIsTransient(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{&TransportError{Op: "UID FETCH", Err: io.ErrUnexpectedEOF}, true},
		{&TransportError{Op: "UID FETCH", Err: wire.ErrTimedOut}, true},
		{io.EOF, true},
		{net.ErrClosed, true},
		{&net.OpError{Op: "read", Err: errors.New("connection reset")}, true},
		{&AuthenticationError{Mechanism: "PLAIN"}, false},
		{&AuthenticationExchangeError{Mechanism: "SCRAM-SHA-256", Err: sasl.ErrMalformedChallenge}, false},
		{&CommandError{Command: "EXAMINE", Status: "NO"}, false},
		{&TLSError{Err: errors.New("x")}, false},
		{ErrStartTLSUnavailable, false},
		{ErrLoginDisabled, false},
		{ErrMailboxFolderRecreated, false},
		{ErrFolderListTooLarge, false},
		{ErrProtocolViolation, false},
		{context.Canceled, false},
		{context.DeadlineExceeded, false},
		{&TransportError{Op: "connect", Err: context.Canceled}, false},
		{errors.New("something unrecognized"), false},
	} {
		require.Equal(t, tc.want, IsTransient(tc.err), "%v", tc.err)
	}
}
