package dovecot

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/internal/testharness/mailbox"
)

// Dial returns a new client connected to TLSAddr and logged in as u with
// the IMAP LOGIN command, closed in the cleanup of u's test. It is for
// steps a test drives over the network itself; the code under test should
// make its own connections. LOGIN needs the PLAIN mechanism: with
// WithAuthMechanisms lacking "plain", Dial fails.
func (u *User) Dial() *imapclient.Client {
	u.t.Helper()
	c, err := u.DialTLS()
	u.Check(err, "dial")
	u.t.Cleanup(func() { mailbox.Close(c) })
	return c
}

// DialTLS is Dial for a goroutine other than the test's: it returns the
// failure instead of failing the test, and leaves closing the client to
// the caller. A test that acts as another mail client while the code
// under test runs (the soak's) dials with it, and tolerates a server that
// is restarting.
func (u *User) DialTLS() (*imapclient.Client, error) {
	return mailbox.DialTLS(u.srv.TLSAddr(), u.srv.TLSConfig(), u.name, u.password)
}

// helperConn is a pre-authenticated IMAP session: `doveadm exec imap -u
// user` talking over a socket pair. Helpers use it instead of a network
// login so that they work whatever WithAuthMechanisms, WithoutSTARTTLS or
// the plaintext rules say, and so that the log's "Login:" lines come only
// from the code under test. The imap process still looks the user up
// through the running server's auth service and drops to the mail user.
type helperConn struct {
	client *imapclient.Client
	cmd    *exec.Cmd
	exited chan struct{}
}

// doveadmPath locates doveadm, which the dovecot-core package installs
// next to dovecot.
func doveadmPath(dovecotBinary string) string {
	if p, err := exec.LookPath("doveadm"); err == nil {
		return p
	}
	for _, p := range []string{filepath.Join(filepath.Dir(dovecotBinary), "doveadm"), "/usr/bin/doveadm"} {
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	return "doveadm"
}

// dialHelper starts a helper connection for user and returns its client
// and how to end it, for the Session of user's helpers.
func (in *instance) dialHelper(user string) (*imapclient.Client, func(), error) {
	// Pipes, not a socket pair: imap refuses a socket on stdin ("must not
	// be started from inetd").
	toImap, stdin, err := os.Pipe()
	if err != nil {
		return nil, nil, err
	}
	stdout, fromImap, err := os.Pipe()
	if err != nil {
		toImap.Close()
		stdin.Close()
		return nil, nil, err
	}
	defer toImap.Close()
	defer fromImap.Close()
	conn := &pipeConn{r: stdout, w: stdin}

	cmd := exec.Command(doveadmPath(in.binary), "-c", in.conf, "exec", "imap", "-u", user)
	cmd.Dir = in.params.dir
	cmd.Env = []string{"PATH=/usr/sbin:/usr/bin:/sbin:/bin", "TZ=UTC"}
	cmd.Stdin, cmd.Stdout = toImap, fromImap
	if out, err := os.OpenFile(filepath.Join(in.params.dir, "helpers.out"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644); err == nil {
		defer out.Close()
		cmd.Stderr = out
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
	if err := cmd.Start(); err != nil {
		conn.Close()
		return nil, nil, fmt.Errorf("start doveadm exec imap: %w", err)
	}
	h := &helperConn{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(h.exited)
	}()
	_ = conn.SetDeadline(time.Now().Add(mailbox.DialTimeout))
	h.client = imapclient.New(conn, nil)
	if err := h.client.WaitGreeting(); err != nil {
		h.close()
		return nil, nil, fmt.Errorf("doveadm exec imap: %w (see %s)", err, in.params.logFile())
	}
	_ = conn.SetDeadline(time.Time{})
	if h.client.State() != imap.ConnStateAuthenticated {
		h.close()
		return nil, nil, errors.New("doveadm exec imap: no PREAUTH greeting")
	}
	return h.client, h.close, nil
}

// close ends the session and waits, bounded, for the imap process.
func (h *helperConn) close() {
	mailbox.Close(h.client)
	select {
	case <-h.exited:
	case <-time.After(2 * time.Second):
		_ = h.cmd.Process.Kill()
		<-h.exited
	}
}

// pipeConn is a net.Conn over a pair of pipes, whose os.File deadlines
// work because os.Pipe files use the runtime poller.
type pipeConn struct {
	r, w *os.File
}

func (c *pipeConn) Read(p []byte) (int, error)  { return c.r.Read(p) }
func (c *pipeConn) Write(p []byte) (int, error) { return c.w.Write(p) }

func (c *pipeConn) Close() error {
	return errors.Join(c.w.Close(), c.r.Close())
}

func (c *pipeConn) LocalAddr() net.Addr  { return pipeAddr{} }
func (c *pipeConn) RemoteAddr() net.Addr { return pipeAddr{} }

func (c *pipeConn) SetDeadline(t time.Time) error {
	return errors.Join(c.r.SetReadDeadline(t), c.w.SetWriteDeadline(t))
}

func (c *pipeConn) SetReadDeadline(t time.Time) error  { return c.r.SetReadDeadline(t) }
func (c *pipeConn) SetWriteDeadline(t time.Time) error { return c.w.SetWriteDeadline(t) }

type pipeAddr struct{}

func (pipeAddr) Network() string { return "pipe" }
func (pipeAddr) String() string  { return "doveadm-exec-imap" }
