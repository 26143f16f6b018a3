package dovecot_test

import (
	"bufio"
	"crypto/hmac"
	"crypto/md5"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"hash"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// rawConn is a line-level IMAP connection for checks imapclient does not
// allow (ENABLE QRESYNC, reading the greeting verbatim).
type rawConn struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
	tag  int
	// Greeting is the server's first "* OK [CAPABILITY ...]" line.
	Greeting string
}

// dialRaw connects to addr from localIP ("" for the default) with TLS
// config tlsConfig (nil for plain) and reads the greeting.
func dialRaw(t *testing.T, localIP, addr string, tlsConfig *tls.Config) *rawConn {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	if localIP != "" {
		d.LocalAddr = &net.TCPAddr{IP: net.ParseIP(localIP)}
	}
	var conn net.Conn
	var err error
	if tlsConfig != nil {
		conn, err = tls.DialWithDialer(d, "tcp", addr, tlsConfig)
	} else {
		conn, err = d.Dial("tcp", addr)
	}
	require.NoError(t, err)
	t.Cleanup(func() { conn.Close() })
	require.NoError(t, conn.SetDeadline(time.Now().Add(30*time.Second)))
	c := &rawConn{t: t, conn: conn, r: bufio.NewReader(conn)}
	for {
		line := c.readLine()
		if strings.HasPrefix(line, "* OK [CAPABILITY ") {
			c.Greeting = line
			return c
		}
		require.True(t, strings.HasPrefix(line, "* OK"), "greeting %q", line)
	}
}

func (c *rawConn) readLine() string {
	c.t.Helper()
	line, err := c.r.ReadString('\n')
	require.NoError(c.t, err)
	return strings.TrimRight(line, "\r\n")
}

func (c *rawConn) send(line string) {
	c.t.Helper()
	_, err := c.conn.Write([]byte(line + "\r\n"))
	require.NoError(c.t, err)
}

// cmd sends a tagged command and returns the untagged lines and the
// tagged status line.
func (c *rawConn) cmd(command string) (untagged []string, status string) {
	c.t.Helper()
	c.tag++
	tag := fmt.Sprintf("t%d", c.tag)
	c.send(tag + " " + command)
	for {
		line := c.readLine()
		if strings.HasPrefix(line, tag+" ") {
			return untagged, strings.TrimPrefix(line, tag+" ")
		}
		untagged = append(untagged, line)
	}
}

// authenticate runs AUTHENTICATE mech with a client-side mechanism and
// returns the tagged status line.
func (c *rawConn) authenticate(mech string, next func(challenge []byte) []byte) string {
	c.t.Helper()
	c.tag++
	tag := fmt.Sprintf("t%d", c.tag)
	c.send(tag + " AUTHENTICATE " + mech)
	for {
		line := c.readLine()
		switch {
		case strings.HasPrefix(line, tag+" "):
			return strings.TrimPrefix(line, tag+" ")
		case strings.HasPrefix(line, "+"):
			challenge, err := base64.StdEncoding.DecodeString(strings.TrimSpace(strings.TrimPrefix(line, "+")))
			require.NoError(c.t, err)
			c.send(base64.StdEncoding.EncodeToString(next(challenge)))
		}
	}
}

// cramMD5 answers a CRAM-MD5 challenge (RFC 2195).
func cramMD5(user, password string) func([]byte) []byte {
	return func(challenge []byte) []byte {
		mac := hmac.New(md5.New, []byte(password))
		mac.Write(challenge)
		return []byte(user + " " + hex.EncodeToString(mac.Sum(nil)))
	}
}

// scram is a minimal SCRAM client (RFC 5802) without channel binding.
func scram(t *testing.T, h func() hash.Hash, user, password string) func([]byte) []byte {
	nonce := make([]byte, 18)
	_, _ = rand.Read(nonce)
	clientNonce := base64.RawStdEncoding.EncodeToString(nonce)
	clientFirstBare := "n=" + user + ",r=" + clientNonce
	step := 0
	var serverSignature []byte
	return func(challenge []byte) []byte {
		step++
		switch step {
		case 1: // empty challenge: send client-first
			return []byte("n,," + clientFirstBare)
		case 2: // server-first
			fields := map[string]string{}
			for _, kv := range strings.Split(string(challenge), ",") {
				fields[kv[:1]] = kv[2:]
			}
			require.True(t, strings.HasPrefix(fields["r"], clientNonce))
			salt, err := base64.StdEncoding.DecodeString(fields["s"])
			require.NoError(t, err)
			var iter int
			_, err = fmt.Sscan(fields["i"], &iter)
			require.NoError(t, err)
			salted, err := pbkdf2.Key(h, password, salt, iter, h().Size())
			require.NoError(t, err)
			hm := func(key []byte, msg string) []byte {
				m := hmac.New(h, key)
				m.Write([]byte(msg))
				return m.Sum(nil)
			}
			clientKey := hm(salted, "Client Key")
			sum := h()
			sum.Write(clientKey)
			storedKey := sum.Sum(nil)
			finalWithoutProof := "c=biws,r=" + fields["r"]
			authMessage := clientFirstBare + "," + string(challenge) + "," + finalWithoutProof
			signature := hm(storedKey, authMessage)
			proof := make([]byte, len(clientKey))
			for i := range proof {
				proof[i] = clientKey[i] ^ signature[i]
			}
			serverSignature = hm(hm(salted, "Server Key"), authMessage)
			return []byte(finalWithoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof))
		default: // server-final
			require.Equal(t, "v="+base64.StdEncoding.EncodeToString(serverSignature), string(challenge))
			return nil
		}
	}
}
