package cyrus

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"regexp"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/testharness/mailbox"
)

// rawConn is a line-level IMAP session for what go-imap cannot send or
// parse, such as FETCH EMAILID (RFC 8474). It logs in with LOGIN on the
// plain listener and sends the harness's ID, as the helper session does.
// It handles no literals: a response carrying one is an error.
type rawConn struct {
	conn net.Conn
	r    *bufio.Reader
	tag  int
}

// rawTimeout bounds a whole raw session.
const rawTimeout = 30 * time.Second

// literal matches a line announcing a literal.
var literal = regexp.MustCompile(`\{\d+\+?\}$`)

func (u *User) dialRaw() (*rawConn, error) {
	conn, err := net.DialTimeout("tcp", u.srv.Addr(), mailbox.DialTimeout)
	if err != nil {
		return nil, err
	}
	_ = conn.SetDeadline(time.Now().Add(rawTimeout))
	c := &rawConn{conn: conn, r: bufio.NewReader(conn)}
	if line, err := c.readLine(); err != nil || !strings.HasPrefix(line, "* OK") {
		conn.Close()
		return nil, fmt.Errorf("greeting %q: %v", line, err)
	}
	for _, cmd := range []string{
		fmt.Sprintf("LOGIN %q %q", u.name, u.password),
		fmt.Sprintf("ID (\"name\" %q)", helperID),
	} {
		if _, err := c.command(cmd); err != nil {
			conn.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *rawConn) readLine() (string, error) {
	line, err := c.r.ReadString('\n')
	line = strings.TrimRight(line, "\r\n")
	if err == nil && literal.MatchString(line) {
		err = errors.New("a literal in a response, which rawConn does not read")
	}
	return line, err
}

// command sends one tagged command and returns the untagged responses; a
// status other than OK is an error.
func (c *rawConn) command(cmd string) (untagged []string, err error) {
	c.tag++
	tag := fmt.Sprintf("h%d", c.tag)
	if _, err := c.conn.Write([]byte(tag + " " + cmd + "\r\n")); err != nil {
		return nil, err
	}
	for {
		line, err := c.readLine()
		if err != nil {
			return nil, err
		}
		status, ok := strings.CutPrefix(line, tag+" ")
		if !ok {
			untagged = append(untagged, line)
			continue
		}
		if !strings.HasPrefix(status, "OK") {
			name, _, _ := strings.Cut(cmd, " ")
			return nil, fmt.Errorf("%s: %s", name, status)
		}
		return untagged, nil
	}
}

func (c *rawConn) close() {
	_, _ = c.command("LOGOUT")
	c.conn.Close()
}
