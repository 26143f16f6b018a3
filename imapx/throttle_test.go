package imapx_test

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// The answers of this file are what providers send when they throttle an
// account — RFC 5530's [UNAVAILABLE], [LIMIT], [OVERQUOTA] and [INUSE],
// [THROTTLED], Microsoft 365's "Request is throttled. Suggested Backoff
// Time", Gmail's "Account exceeded command or bandwidth limits" and "Too
// many simultaneous connections" — which Dovecot cannot be made to send,
// so a scripted server plays them.

// throttleSecret is server text that must never reach an error.
const throttleSecret = "mailbox-of-someone@example.test"

// scriptedBody is the one message the scripted server delivers before it
// ends a fetch.
const scriptedBody = "Subject: hello\r\n\r\nbody\r\n"

// throttleScript is a scripted server: it greets with greeting (an
// ordinary greeting when empty), reads an AUTHENTICATE and answers it with
// login (OK when empty), then answers EXAMINE with a folder of three
// messages, UID SEARCH with all three, UID FETCH with their bodies and
// LOGOUT with BYE — unless reply, given each later command's tag and
// upper-cased name ("UID FETCH" for a UID command), answers it itself and
// returns true; a reply that returns false ends the connection.
func throttleScript(greeting, login string, reply func(c *imapscript.Conn, tag, name string) (handled, more bool)) imapscript.Script {
	return func(c *imapscript.Conn) {
		if greeting != "" {
			c.Send(greeting)
			return
		}
		c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN")
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		if login == "" {
			login = "TAG OK [CAPABILITY IMAP4rev1 UIDPLUS] logged in"
		}
		c.Send(strings.ReplaceAll(login, "TAG", tag))
		switch {
		case strings.HasPrefix(login, "* BYE"):
			return
		case !strings.HasPrefix(login, "TAG OK"):
			// A server that refused the login ends the connection when
			// the client does.
			c.Serve()
			return
		}
		for {
			line, ok := c.ReadLine()
			if !ok {
				return
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			tag, name := f[0], strings.ToUpper(f[1])
			if name == "UID" && len(f) > 2 {
				name += " " + strings.ToUpper(f[2])
			}
			if reply != nil {
				if handled, more := reply(c, tag, name); handled {
					if !more {
						return
					}
					continue
				}
			}
			switch name {
			case "EXAMINE":
				c.Send("* 3 EXISTS", "* OK [UIDVALIDITY 7] ok", "* OK [UIDNEXT 4] ok", tag+" OK [READ-ONLY] done")
			case "UID SEARCH":
				c.Send("* SEARCH 1 2 3", tag+" OK done")
			case "UID FETCH":
				for i := 1; i <= 3; i++ {
					c.Send("* " + strconv.Itoa(i) + " FETCH (UID " + strconv.Itoa(i) + " BODY[] {" + strconv.Itoa(len(scriptedBody)) + "}\r\n" + scriptedBody + ")")
				}
				c.Send(tag + " OK done")
			case "CAPABILITY":
				c.Send("* CAPABILITY IMAP4rev1 UIDPLUS", tag+" OK done")
			case "LOGOUT":
				c.Send("* BYE bye", tag+" OK done")
				return
			default:
				c.Send(tag + " BAD not scripted")
			}
		}
	}
}

// replyTo answers command name with lines (TAG replaced by the command's
// tag), ending the connection afterwards when end is set.
func replyTo(name string, end bool, lines ...string) func(c *imapscript.Conn, tag, got string) (bool, bool) {
	return func(c *imapscript.Conn, tag, got string) (bool, bool) {
		if got != name {
			return false, true
		}
		for _, l := range lines {
			c.Send(strings.ReplaceAll(l, "TAG", tag))
		}
		return true, !end
	}
}

// TestThrottlingAnswers: every form a throttling answer takes, at every
// step a server can give it, is a *ThrottledError with the fixed reason
// and the suggested delay, carrying none of the server's text; it is not
// transient (no pipeline repeats it now), it is not a rejected credential,
// and what it wraps says whether the connection survived.
func TestThrottlingAnswers(t *testing.T) {
	t.Parallel()
	type op int
	const (
		openOnly op = iota
		examine
		search
		fetch
	)
	tests := []struct {
		name     string
		greeting string
		login    string
		reply    func(c *imapscript.Conn, tag, name string) (bool, bool)
		op       op
		reason   imapx.ThrottleReason
		delay    time.Duration
		// bye: the answer ended the connection (a *TransportError inside),
		// otherwise a tagged refusal (a *CommandError inside).
		bye     bool
		command string
	}{
		{name: "EXAMINE NO [UNAVAILABLE]", op: examine, reply: replyTo("EXAMINE", false, "TAG NO [UNAVAILABLE] backend of "+throttleSecret+" down"),
			reason: imapx.ThrottleUnavailable, command: "EXAMINE"},
		{name: "UID SEARCH NO [LIMIT]", op: search, reply: replyTo("UID SEARCH", false, "TAG NO [LIMIT] too many commands for "+throttleSecret),
			reason: imapx.ThrottleLimit, command: "UID SEARCH"},
		{name: "UID FETCH NO [OVERQUOTA]", op: fetch, reply: replyTo("UID FETCH", false, "TAG NO [OVERQUOTA] download quota of "+throttleSecret),
			reason: imapx.ThrottleOverQuota, command: "UID FETCH"},
		{name: "EXAMINE NO [INUSE]", op: examine, reply: replyTo("EXAMINE", false, "TAG NO [INUSE] mailbox locked"),
			reason: imapx.ThrottleInUse, command: "EXAMINE"},
		{name: "UID FETCH NO [THROTTLED]", op: fetch, reply: replyTo("UID FETCH", false, "TAG NO [THROTTLED] slow down"),
			reason: imapx.ThrottleThrottled, command: "UID FETCH"},
		{name: "Microsoft 365 throttles a fetch", op: fetch,
			reply:  replyTo("UID FETCH", false, "TAG NO Request is throttled. Suggested Backoff Time: 2500 milliseconds"),
			reason: imapx.ThrottleRequestThrottled, delay: 2500 * time.Millisecond, command: "UID FETCH"},
		{name: "Microsoft 365 throttles the login", op: openOnly, login: "TAG NO Request is throttled. Suggested Backoff Time: 180000 milliseconds",
			reason: imapx.ThrottleRequestThrottled, delay: 3 * time.Minute, command: "AUTHENTICATE PLAIN"},
		{name: "Gmail: too many simultaneous connections at login", op: openOnly, login: "TAG NO [ALERT] Too many simultaneous connections. (Failure)",
			reason: imapx.ThrottleTooManyConnections, command: "AUTHENTICATE PLAIN"},
		{name: "login NO [UNAVAILABLE]", op: openOnly, login: "TAG NO [UNAVAILABLE] authentication backend down",
			reason: imapx.ThrottleUnavailable, command: "AUTHENTICATE PLAIN"},
		{name: "login NO [INUSE]", op: openOnly, login: "TAG NO [INUSE] " + throttleSecret + " is busy",
			reason: imapx.ThrottleInUse, command: "AUTHENTICATE PLAIN"},
		{name: "Gmail: BYE while authenticating", op: openOnly, login: "* BYE [ALERT] Too many simultaneous connections.",
			reason: imapx.ThrottleTooManyConnections, bye: true, command: "AUTHENTICATE PLAIN"},
		{name: "BYE greeting [UNAVAILABLE]", op: openOnly, greeting: "* BYE [UNAVAILABLE] maintenance for " + throttleSecret,
			reason: imapx.ThrottleUnavailable, bye: true, command: "greeting"},
		{name: "Gmail: BYE greeting, bandwidth", op: openOnly, greeting: "* BYE [ALERT] Account exceeded command or bandwidth limits",
			reason: imapx.ThrottleBandwidthExceeded, bye: true, command: "greeting"},
		{name: "Gmail: BYE mid-fetch", op: fetch,
			reply: replyTo("UID FETCH", true,
				"* 1 FETCH (UID 1 BODY[] {"+strconv.Itoa(len(scriptedBody))+"}\r\n"+scriptedBody+")",
				"* BYE [ALERT] Account exceeded command or bandwidth limits. "+throttleSecret),
			reason: imapx.ThrottleBandwidthExceeded, bye: true, command: "UID FETCH"},
		{name: "Gmail: tagged NO [ALERT] to a fetch", op: fetch,
			reply:  replyTo("UID FETCH", false, "TAG NO [ALERT] Account exceeded command or bandwidth limits"),
			reason: imapx.ThrottleBandwidthExceeded, command: "UID FETCH"},
		{name: "BYE mid-search with a suggested time", op: search,
			reply:  replyTo("UID SEARCH", true, "* BYE Request is throttled. Suggested Backoff Time: 750 milliseconds"),
			reason: imapx.ThrottleRequestThrottled, delay: 750 * time.Millisecond, bye: true, command: "UID SEARCH"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := imapscript.Start(t, throttleScript(tt.greeting, tt.login, tt.reply))
			err := throttleRun(t, srv, tt.op == examine || tt.op == search || tt.op == fetch, func(s *imapx.ReadSession) error {
				switch tt.op {
				case search:
					_, err := s.SearchUIDs(t.Context(), 0, time.Time{})
					return err
				case fetch:
					return s.FetchBodies(t.Context(), []uint32{1, 2, 3}, 1<<20, func(imapx.Body) error { return nil })
				}
				return nil
			})
			require.Error(t, err)
			th, ok := imapx.AsThrottled(err)
			require.True(t, ok, "%T %v", err, err)
			require.Equal(t, tt.reason, th.Reason)
			require.Equal(t, tt.delay, th.Delay)
			require.False(t, imapx.IsTransient(err), "a throttled answer is not repeated now")
			identity, _ := failure.Identity(err)
			require.Equal(t, imapx.ThrottledIdentity, identity)
			var authErr *imapx.AuthenticationError
			require.False(t, errors.As(err, &authErr), "a throttled login is not a rejected credential")
			for _, text := range []string{throttleSecret, "Request is", "exceeded", "simultaneous", "backend", "locked", scriptedSecret} {
				require.NotContains(t, err.Error(), text, "server text and secrets stay out of errors")
			}
			if tt.bye {
				var tr *imapx.TransportError
				require.True(t, errors.As(err, &tr), "%v", err)
				require.Equal(t, tt.command, tr.Op)
			} else {
				var cmd *imapx.CommandError
				require.True(t, errors.As(err, &cmd), "%v", err)
				require.Equal(t, tt.command, cmd.Command)
			}
			require.Equal(t, 1, srv.Connections(), "one connection, nothing repeated")
		})
	}
}

// TestThrottlingGreetingOverTLS: on a connection protected from its first
// byte, go-imap reads the greeting; its BYE that throttles is read the
// same.
func TestThrottlingGreetingOverTLS(t *testing.T) {
	t.Parallel()
	srv := imapscript.Start(t, throttleScript("* BYE [ALERT] Account exceeded command or bandwidth limits", "", nil))
	ca := testca.New()
	ep := throttleEndpoint(srv)
	ep.Security = imapx.TLSOnConnect
	ep.TLSConfig = ca.ClientTLSConfig()
	ep.TLSConfig.ServerName = "127.0.0.1"
	ep.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
		plain, err := (&net.Dialer{}).DialContext(ctx, network, srv.Addr())
		if err != nil {
			return nil, err
		}
		client, server := net.Pipe()
		go func() {
			defer plain.Close()
			ts := tls.Server(server, ca.ServerTLSConfig(nil))
			defer ts.Close()
			go func() { _, _ = io.Copy(plain, ts) }()
			_, _ = io.Copy(ts, plain)
		}()
		return client, nil
	}
	_, err := imapx.OpenReadSession(t.Context(), ep, imapx.SessionOptions{CommandTimeout: 5 * time.Second})
	th, ok := imapx.AsThrottled(err)
	require.True(t, ok, "%T %v", err, err)
	require.Equal(t, imapx.ThrottleBandwidthExceeded, th.Reason)
	var tr *imapx.TransportError
	require.True(t, errors.As(err, &tr))
	require.Equal(t, "greeting", tr.Op)
	require.False(t, imapx.IsTransient(err))
}

// TestAnswersThatDoNotThrottle: what looks like a throttling answer and is
// not stays what it was — a rejected credential terminal whatever its
// text says, a BYE that says nothing of limits transient, and message
// content that quotes a throttling BYE inside a literal is content.
func TestAnswersThatDoNotThrottle(t *testing.T) {
	t.Parallel()

	t.Run("RejectedCredentialStaysRejected", func(t *testing.T) {
		t.Parallel()
		for _, login := range []string{
			"TAG NO [AUTHENTICATIONFAILED] Invalid credentials",
			"TAG NO [AUTHENTICATIONFAILED] Too many simultaneous connections",
			"TAG NO Authentication failed",
		} {
			srv := imapscript.Start(t, throttleScript("", login, nil))
			err := throttleRun(t, srv, false, nil)
			var authErr *imapx.AuthenticationError
			require.True(t, errors.As(err, &authErr), "%s: %v", login, err)
			_, throttled := imapx.AsThrottled(err)
			require.False(t, throttled, login)
			require.False(t, imapx.IsTransient(err))
		}
	})

	t.Run("ShutdownByeIsALostConnection", func(t *testing.T) {
		t.Parallel()
		srv := imapscript.Start(t, throttleScript("", "", replyTo("UID FETCH", true, "* BYE Server shutting down")))
		err := throttleRun(t, srv, true, func(s *imapx.ReadSession) error {
			return s.FetchBodies(t.Context(), []uint32{1, 2, 3}, 1<<20, func(imapx.Body) error { return nil })
		})
		_, throttled := imapx.AsThrottled(err)
		require.False(t, throttled)
		require.True(t, imapx.IsTransient(err), "%v", err)
	})

	t.Run("ContentQuotingAThrottleIsContent", func(t *testing.T) {
		t.Parallel()
		quoting := "Subject: fwd\r\n\r\n* BYE [ALERT] Account exceeded command or bandwidth limits\r\n"
		srv := imapscript.Start(t, throttleScript("", "", replyTo("UID FETCH", true,
			"* 1 FETCH (UID 1 BODY[] {"+strconv.Itoa(len(quoting))+"}\r\n"+quoting+")",
			"* BYE Server shutting down")))
		var got []string
		err := throttleRun(t, srv, true, func(s *imapx.ReadSession) error {
			return s.FetchBodies(t.Context(), []uint32{1, 2, 3}, 1<<20, func(b imapx.Body) error {
				got = append(got, string(b.Raw))
				return nil
			})
		})
		require.Equal(t, []string{quoting}, got)
		_, throttled := imapx.AsThrottled(err)
		require.False(t, throttled, "the quoted BYE is the message's, not the server's")
		require.True(t, imapx.IsTransient(err), "%v", err)
	})
}

// TestThrottlingOnTheReconciliationConnection: the adapter's own command
// layer reads the same answers: a tagged NO that throttles on EXAMINE and
// a BYE that throttles during a reconciliation fetch.
func TestThrottlingOnTheReconciliationConnection(t *testing.T) {
	t.Parallel()
	t.Run("ExamineNO", func(t *testing.T) {
		t.Parallel()
		srv := imapscript.Start(t, throttleScript("", "", replyTo("EXAMINE", false, "TAG NO [THROTTLED] later")))
		s, err := imapx.OpenReconcileSession(t.Context(), throttleEndpoint(srv), imapx.SessionOptions{CommandTimeout: 5 * time.Second})
		require.NoError(t, err)
		defer s.Abandon()
		_, err = s.Examine(t.Context(), "INBOX")
		th, ok := imapx.AsThrottled(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, imapx.ThrottleThrottled, th.Reason)
		var cmd *imapx.CommandError
		require.True(t, errors.As(err, &cmd))
		require.False(t, imapx.IsTransient(err))
	})
	t.Run("ByeDuringReconcile", func(t *testing.T) {
		t.Parallel()
		srv := imapscript.Start(t, throttleScript("", "", func(c *imapscript.Conn, tag, name string) (bool, bool) {
			switch name {
			case "UID FETCH", "UID SEARCH":
				c.Send("* BYE [ALERT] Account exceeded command or bandwidth limits")
				return true, false
			}
			return false, true
		}))
		s, err := imapx.OpenReconcileSession(t.Context(), throttleEndpoint(srv), imapx.SessionOptions{CommandTimeout: 5 * time.Second})
		require.NoError(t, err)
		defer s.Abandon()
		_, err = s.Examine(t.Context(), "INBOX")
		require.NoError(t, err)
		_, err = s.Reconcile(t.Context(), []uint32{1, 2, 3}, 0)
		th, ok := imapx.AsThrottled(err)
		require.True(t, ok, "%v", err)
		require.Equal(t, imapx.ThrottleBandwidthExceeded, th.Reason)
		var tr *imapx.TransportError
		require.True(t, errors.As(err, &tr))
		require.False(t, imapx.IsTransient(err))
		require.NotContains(t, err.Error(), "exceeded")
	})
}

// throttleEndpoint is scriptedEndpoint with PLAIN permitted in clear text,
// which the scripted server speaks.
func throttleEndpoint(srv *imapscript.Server) imapx.Endpoint {
	ep := scriptedEndpoint(srv, sasl.Plain)
	ep.AllowClearTextOverUnencrypted = true
	return ep
}

// throttleRun opens a read session to srv, examines INBOX when examine is
// set, and runs fn; it returns the first failure.
func throttleRun(t *testing.T, srv *imapscript.Server, examine bool, fn func(*imapx.ReadSession) error) error {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	s, err := imapx.OpenReadSession(ctx, throttleEndpoint(srv), imapx.SessionOptions{CommandTimeout: 5 * time.Second})
	if err != nil {
		return err
	}
	defer s.Abandon()
	if examine {
		if _, err := s.Examine(ctx, "INBOX"); err != nil {
			return err
		}
	}
	if fn == nil {
		return nil
	}
	return fn(s)
}
