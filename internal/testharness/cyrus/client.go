package cyrus

import (
	"fmt"
	"net"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// dialTimeout bounds connecting, the TLS handshake and the login of Dial
// and of the helper sessions.
const dialTimeout = 10 * time.Second

// helperID is the name the helper sessions give in their ID command, by
// which Sessions tells them from the code under test.
const helperID = "mailfathom-testharness"

// Dial returns a new client connected to TLSAddr and logged in as u with
// the IMAP LOGIN command, closed in the cleanup of u's test. It is for
// steps a test drives over the network itself; the code under test should
// make its own connections. Its session shows in Sessions.
func (u *User) Dial() *imapclient.Client {
	u.t.Helper()
	c, err := imapclient.DialTLS(u.srv.TLSAddr(), &imapclient.Options{
		Dialer:    &net.Dialer{Timeout: dialTimeout},
		TLSConfig: u.srv.TLSConfig(),
	})
	if err != nil {
		u.t.Fatalf("cyrus: user %s: dial: %v", u.name, err)
	}
	if err := c.Login(u.name, u.password).Wait(); err != nil {
		c.Close()
		u.t.Fatalf("cyrus: user %s: login: %v", u.name, err)
	}
	u.t.Cleanup(func() { closeClient(c) })
	return c
}

// closeClient logs out, bounded in time, and closes c.
func closeClient(c *imapclient.Client) {
	done := make(chan struct{})
	go func() {
		_ = c.Logout().Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(2 * time.Second):
	}
	c.Close()
}

// dialHelper opens a helper session for u: plain text on the loopback
// listener, LOGIN, and the ID that marks it as the harness's.
func (u *User) dialHelper() (*imapclient.Client, error) {
	c, err := imapclient.DialInsecure(u.srv.Addr(), &imapclient.Options{Dialer: &net.Dialer{Timeout: dialTimeout}})
	if err != nil {
		return nil, err
	}
	if err := c.Login(u.name, u.password).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("login: %w", err)
	}
	if _, err := c.ID(&imap.IDData{Name: helperID}).Wait(); err != nil {
		closeClient(c)
		return nil, fmt.Errorf("ID: %w", err)
	}
	return c, nil
}

// withHelper runs f with u's helper session, starting one first when
// there is none, when it ended, or when the server restarted since.
func (u *User) withHelper(f func(c *imapclient.Client) error) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	in := u.srv.in
	gen, running := in.sup.Run()
	if !running {
		return errStopped
	}
	if u.helper != nil {
		stale := u.generation != gen
		select {
		case <-u.helper.Closed():
			stale = true
		default:
		}
		if stale {
			u.helper.Close()
			u.helper = nil
		}
	}
	if u.helper == nil {
		c, err := u.dialHelper()
		if err != nil {
			return err
		}
		u.helper, u.generation = c, gen
	}
	return f(u.helper)
}

// closeHelper ends the helper session, if any.
func (u *User) closeHelper() {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.helper != nil {
		closeClient(u.helper)
		u.helper = nil
	}
}
