package cyrus

import (
	"fmt"
	"net"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/internal/testharness/mailbox"
)

// helperID is the name the helper sessions give in their ID command, by
// which Sessions tells them from the code under test.
const helperID = "mailfathom-testharness"

// Dial returns a new client connected to TLSAddr and logged in as u with
// the IMAP LOGIN command, closed in the cleanup of u's test. It is for
// steps a test drives over the network itself; the code under test should
// make its own connections. Its session shows in Sessions.
func (u *User) Dial() *imapclient.Client {
	u.t.Helper()
	c, err := mailbox.DialTLS(u.srv.TLSAddr(), u.srv.TLSConfig(), u.name, u.password)
	u.Check(err, "dial")
	u.t.Cleanup(func() { mailbox.Close(c) })
	return c
}

// dialHelper opens a helper session for u: plain text on the loopback
// listener, LOGIN, and the ID that marks it as the harness's. It returns
// the client and how to end it, for the Session of u's helpers.
func (u *User) dialHelper() (*imapclient.Client, func(), error) {
	c, err := imapclient.DialInsecure(u.srv.Addr(), &imapclient.Options{Dialer: &net.Dialer{Timeout: mailbox.DialTimeout}})
	if err != nil {
		return nil, nil, err
	}
	if err := c.Login(u.name, u.password).Wait(); err != nil {
		c.Close()
		return nil, nil, fmt.Errorf("login: %w", err)
	}
	if _, err := c.ID(&imap.IDData{Name: helperID}).Wait(); err != nil {
		mailbox.Close(c)
		return nil, nil, fmt.Errorf("ID: %w", err)
	}
	return c, func() { mailbox.Close(c) }, nil
}
