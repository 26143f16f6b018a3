// Package imapscript runs a scripted IMAP server on loopback, for the few
// cases no real server can be made to produce: a SCRAM server-final
// message carrying an error value (Dovecot answers a wrong proof or an
// unknown user with a plain NO), a challenge that breaks a mechanism's
// grammar or is not base64, an iteration count out of range, a bearer
// token's error challenge followed by a dropped connection. Everything a
// real server can do is tested against Dovecot (package dovecot); a test
// that uses this package says in a comment why it has to.
//
// Start listens on 127.0.0.1 and runs the script for every connection it
// accepts, each in its own goroutine; when the script returns, the
// connection is closed, which is how a script drops it. The server speaks
// plain IMAP only, so the client's endpoint uses connection security None
// with its opt-in:
//
//	srv := imapscript.Start(t, imapscript.ScramServerFinal("e=invalid-proof"))
//	ep.Host, ep.Port, ep.Security = srv.Host(), srv.Port(), imapx.None
//	...
//	require.Equal(t, 1, srv.Connections(), "one attempt")
//
// The canned scripts greet with Capabilities, which advertises SASL-IR so
// that the initial response comes with the AUTHENTICATE command.
package imapscript

import (
	"bufio"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"hash"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/mailfathom/mailfathom/internal/testharness/loopback"
)

// Capabilities is what the canned scripts greet with: every mechanism they
// script, and SASL-IR.
const Capabilities = "IMAP4rev1 SASL-IR AUTH=SCRAM-SHA-1 AUTH=SCRAM-SHA-256 AUTH=SCRAM-SHA-512 AUTH=XOAUTH2 AUTH=OAUTHBEARER"

// Script plays the server's side of one connection.
type Script func(c *Conn)

// Server is a scripted IMAP server on a loopback port.
type Server struct {
	ln     *loopback.Listener
	script Script
	conns  atomic.Int64

	mu    sync.Mutex
	mechs []string
}

// Start listens on a free loopback port and runs script for every
// connection until the test ends.
func Start(t testing.TB, script Script) *Server {
	t.Helper()
	s := &Server{ln: loopback.Listen(t, "imapscript"), script: script}
	s.ln.Serve(func(nc net.Conn) {
		s.conns.Add(1)
		// A script never waits longer than a test would.
		_ = nc.SetDeadline(time.Now().Add(time.Minute))
		s.script(&Conn{srv: s, nc: nc, br: bufio.NewReader(nc)})
	})
	return s
}

// Addr is the listener's address, "127.0.0.1:port".
func (s *Server) Addr() string { return s.ln.Addr() }

// Host is "127.0.0.1".
func (s *Server) Host() string { return loopback.Host }

// Port is the listener's port.
func (s *Server) Port() int { return s.ln.Port() }

// PortText is Port in decimal, for an environment variable.
func (s *Server) PortText() string { return strconv.Itoa(s.Port()) }

// Connections is how many connections the server has accepted.
func (s *Server) Connections() int { return int(s.conns.Load()) }

// Mechanisms lists the mechanism of every AUTHENTICATE command the server
// read, in order.
func (s *Server) Mechanisms() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.mechs...)
}

// Conn is one scripted connection.
type Conn struct {
	srv *Server
	nc  net.Conn
	br  *bufio.Reader
}

// Send writes each line followed by CRLF.
func (c *Conn) Send(lines ...string) {
	_, _ = c.nc.Write([]byte(strings.Join(lines, "\r\n") + "\r\n"))
}

// ReadLine returns the next line the client sent without its CRLF, and
// false once the client is gone.
func (c *Conn) ReadLine() (string, bool) {
	line, err := c.br.ReadString('\n')
	if err != nil {
		return "", false
	}
	return strings.TrimRight(line, "\r\n"), true
}

// Greet sends the greeting "* OK [CAPABILITY caps] ready".
func (c *Conn) Greet(caps string) { c.Send("* OK [CAPABILITY " + caps + "] ready") }

// Authenticate reads the client's AUTHENTICATE command, answering any
// CAPABILITY command before it, and returns its tag, its mechanism and the
// decoded initial response. Without an initial response on the command
// line it sends an empty continuation and reads the response. ok is false
// when the client sent something else or went away.
func (c *Conn) Authenticate() (tag, mechanism string, ir []byte, ok bool) {
	for {
		line, ok := c.ReadLine()
		if !ok {
			return "", "", nil, false
		}
		fields := strings.Fields(line)
		if len(fields) >= 2 && strings.EqualFold(fields[1], "CAPABILITY") {
			c.Send("* CAPABILITY "+Capabilities, fields[0]+" OK done")
			continue
		}
		if len(fields) < 3 || !strings.EqualFold(fields[1], "AUTHENTICATE") {
			return "", "", nil, false
		}
		tag, mechanism = fields[0], strings.ToUpper(fields[2])
		c.srv.mu.Lock()
		c.srv.mechs = append(c.srv.mechs, mechanism)
		c.srv.mu.Unlock()
		if len(fields) >= 4 {
			ir, ok = decode(fields[3])
			return tag, mechanism, ir, ok
		}
		c.Send("+ ")
		line, ok = c.ReadLine()
		if !ok {
			return "", "", nil, false
		}
		ir, ok = decode(line)
		return tag, mechanism, ir, ok
	}
}

// Challenge sends data as a base64 challenge and returns the client's
// decoded response; ok is false when the client went away or cancelled.
func (c *Conn) Challenge(data []byte) ([]byte, bool) {
	return c.ChallengeText(base64.StdEncoding.EncodeToString(data))
}

// ChallengeText sends text as the challenge exactly as given, base64 or
// not, and returns the client's decoded response.
func (c *Conn) ChallengeText(text string) ([]byte, bool) {
	c.Send("+ " + text)
	line, ok := c.ReadLine()
	if !ok || line == "*" {
		return nil, false
	}
	return decode(line)
}

func decode(s string) ([]byte, bool) {
	if s == "" || s == "=" {
		return []byte{}, true
	}
	b, err := base64.StdEncoding.DecodeString(s)
	return b, err == nil
}

// ScramNonce returns the client nonce of a SCRAM client-first message
// ("n,,n=user,r=nonce"), or "" when it has none.
func ScramNonce(clientFirst []byte) string {
	for _, attr := range strings.Split(string(clientFirst), ",") {
		if nonce, ok := strings.CutPrefix(attr, "r="); ok {
			return nonce
		}
	}
	return ""
}

// ScramServerFirst is a script that greets, reads a SCRAM AUTHENTICATE and
// sends first(nonce) as the challenge text exactly as returned (base64 for
// a well-formed server-first message, see ScramFirst), where nonce is the
// client's; then, if the client answers and final is not empty, it sends
// final as the server-final message. The connection drops when the client
// gives up.
func ScramServerFirst(first func(nonce string) string, final string) Script {
	return func(c *Conn) {
		c.Greet(Capabilities)
		_, _, ir, ok := c.Authenticate()
		if !ok {
			return
		}
		if _, ok := c.ChallengeText(first(ScramNonce(ir))); !ok || final == "" {
			return
		}
		c.Challenge([]byte(final))
	}
}

// ScramValidFirst returns a well-formed server-first message for nonce:
// the nonce extended by the server's part, a salt and 4096 iterations,
// base64 encoded as a challenge.
func ScramValidFirst(nonce string) string {
	return ScramFirst(nonce, 4096)
}

// ScramFirst is ScramValidFirst with the iteration count iterations.
func ScramFirst(nonce string, iterations int) string {
	msg := "r=" + nonce + "scripted-server-nonce,s=" + base64.StdEncoding.EncodeToString([]byte("scripted salt")) + ",i=" + strconv.Itoa(iterations)
	return base64.StdEncoding.EncodeToString([]byte(msg))
}

// ScramServerFinal is a script that runs a SCRAM exchange with a valid
// server-first message and sends final, such as "e=invalid-proof", as the
// server-final message.
func ScramServerFinal(final string) Script {
	return ScramServerFirst(ScramValidFirst, final)
}

// BearerRefusalThenDrop is a script that reads an XOAUTH2 or OAUTHBEARER
// AUTHENTICATE, refuses the token with the error challenge both use (RFC
// 7628 §3.2.2), reads the client's answer to it and then drops the
// connection instead of ending the command with NO.
func BearerRefusalThenDrop() Script {
	return func(c *Conn) {
		c.Greet(Capabilities)
		if _, _, _, ok := c.Authenticate(); !ok {
			return
		}
		c.Challenge([]byte(`{"status":"invalid_token","schemes":"bearer","scope":"mail"}`))
	}
}

// DropDuringAuthenticate is a script that reads the AUTHENTICATE command
// and drops the connection without a word: a connection lost during
// authentication with nothing from the mechanism.
func DropDuringAuthenticate() Script {
	return func(c *Conn) {
		c.Greet(Capabilities)
		c.Authenticate()
	}
}

// Serve answers CAPABILITY, NOOP and LOGOUT, and BAD to anything else,
// until the client goes away or logs out: the rest of a session whose
// authentication succeeded.
func (c *Conn) Serve() { c.ServeWith("IMAP4rev1", nil) }

// ServeWith is Serve with caps as the CAPABILITY answer and answers for
// more commands: more maps an upper-case command name to what sends its
// answer, given the command's tag. It can override NOOP, but not
// CAPABILITY or LOGOUT.
func (c *Conn) ServeWith(caps string, more map[string]func(tag string)) {
	for {
		line, ok := c.ReadLine()
		if !ok {
			return
		}
		fields := strings.Fields(line)
		if len(fields) < 2 {
			continue
		}
		tag, command := fields[0], strings.ToUpper(fields[1])
		switch answer, scripted := more[command]; {
		case command == "CAPABILITY":
			c.Send("* CAPABILITY "+caps, tag+" OK done")
		case command == "LOGOUT":
			c.Send("* BYE bye", tag+" OK done")
			return
		case scripted:
			answer(tag)
		case command == "NOOP":
			c.Send(tag + " OK done")
		default:
			c.Send(tag + " BAD not scripted")
		}
	}
}

// scramHashes are the hashes of the SCRAM mechanisms ScramServer runs.
var scramHashes = map[string]func() hash.Hash{
	"SCRAM-SHA-1":   sha1.New,
	"SCRAM-SHA-256": sha256.New,
	"SCRAM-SHA-512": sha512.New,
}

// ScramServer is a script that runs the server side of SCRAM-SHA-1,
// SCRAM-SHA-256 or SCRAM-SHA-512 (RFC 5802), whichever the client chose,
// for one user: it derives the user's StoredKey and ServerKey with
// crypto/pbkdf2, checks the client's proof as a server does, answers a
// valid one with its signature and OK and then serves the session, and
// anything else with NO [AUTHENTICATIONFAILED]. It stands in for a server
// offering a mechanism Dovecot 2.3 does not (SCRAM-SHA-512); it is written
// apart from internal/sasl, so it checks that client independently.
func ScramServer(username, password string) Script {
	return func(c *Conn) {
		c.Greet(Capabilities + " AUTH=PLAIN")
		tag, mechanism, ir, ok := c.Authenticate()
		if !ok {
			return
		}
		h := scramHashes[mechanism]
		if h == nil {
			c.Send(tag + " NO [CANNOT] not scripted")
			c.Serve()
			return
		}
		fail := func() {
			c.Send(tag + " NO [AUTHENTICATIONFAILED] failed")
			c.Serve()
		}
		clientFirstBare, found := strings.CutPrefix(string(ir), "n,,")
		if !found || !strings.HasPrefix(clientFirstBare, "n="+username+",") {
			fail()
			return
		}
		salt := []byte("imapscript salt")
		salted, err := pbkdf2.Key(h, password, salt, 4096, h().Size())
		if err != nil {
			fail()
			return
		}
		mac := func(key []byte, msg string) []byte {
			m := hmac.New(h, key)
			m.Write([]byte(msg))
			return m.Sum(nil)
		}
		d := h()
		d.Write(mac(salted, "Client Key"))
		storedKey, serverKey := d.Sum(nil), mac(salted, "Server Key")

		serverFirst := "r=" + ScramNonce(ir) + "imapscript,s=" + base64.StdEncoding.EncodeToString(salt) + ",i=4096"
		resp, ok := c.Challenge([]byte(serverFirst))
		if !ok {
			return
		}
		withoutProof, proofText, found := strings.Cut(string(resp), ",p=")
		proof, err := base64.StdEncoding.DecodeString(proofText)
		if !found || err != nil || len(proof) != len(storedKey) {
			fail()
			return
		}
		authMessage := clientFirstBare + "," + serverFirst + "," + withoutProof
		clientKey := mac(storedKey, authMessage)
		for i := range clientKey {
			clientKey[i] ^= proof[i]
		}
		d = h()
		d.Write(clientKey)
		if !hmac.Equal(d.Sum(nil), storedKey) {
			fail()
			return
		}
		if _, ok := c.Challenge([]byte("v=" + base64.StdEncoding.EncodeToString(mac(serverKey, authMessage)))); !ok {
			return
		}
		c.Send(tag + " OK [CAPABILITY IMAP4rev1] logged in")
		c.Serve()
	}
}

// WatchServer is a script for a server offering IDLE and NOTIFY (RFC 2177,
// RFC 5465) that logs anyone in, answers EXAMINE with an empty read-only
// folder and LOGOUT with BYE, and hands NOTIFY and IDLE, with their tags,
// to notify and idle; anything else is BAD. It stands in where a real
// server cannot be made to decline a subscription or end one.
func WatchServer(notify, idle func(c *Conn, tag string)) Script {
	return func(c *Conn) {
		c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN IDLE NOTIFY")
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		c.Send(tag + " OK [CAPABILITY IMAP4rev1 IDLE NOTIFY] logged in")
		for {
			line, ok := c.ReadLine()
			if !ok {
				return
			}
			f := strings.Fields(line)
			if len(f) < 2 {
				continue
			}
			switch strings.ToUpper(f[1]) {
			case "EXAMINE":
				c.Send("* 0 EXISTS", "* OK [UIDVALIDITY 7] ok", f[0]+" OK [READ-ONLY] done")
			case "NOTIFY":
				notify(c, f[0])
			case "IDLE":
				idle(c, f[0])
			case "LOGOUT":
				c.Send("* BYE bye", f[0]+" OK done")
				return
			default:
				c.Send(f[0] + " BAD not scripted")
			}
		}
	}
}
