package mailbox

import (
	"crypto/tls"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
)

// DialTimeout bounds connecting and the TLS handshake of DialTLS.
const DialTimeout = 10 * time.Second

// logoutWait bounds how long Close waits for the answer to LOGOUT.
const logoutWait = 2 * time.Second

// Session is a mailbox owner's long-lived session for a harness's
// helpers: dialled on first use, and again when the one there has ended or
// was dialled in an earlier run of the server (after a restart). It runs
// one operation at a time. The zero value has no dial; use NewSession.
type Session struct {
	dial func() (c *imapclient.Client, end func(), err error)

	mu     sync.Mutex
	client *imapclient.Client
	end    func()
	run    uint64 // the server run client was dialled in
}

// NewSession returns a Session that opens its client with dial, which
// returns an authenticated client with no mailbox selected and how to end
// it (Close, or more for a client that has a process of its own).
func NewSession(dial func() (c *imapclient.Client, end func(), err error)) *Session {
	return &Session{dial: dial}
}

// Do runs f with the session's client, dialling one first when there is
// none, when the one there has ended, or when it was dialled in another
// run of the server than run. It returns dial's error or f's. Owner calls
// it with the server's current run.
func (s *Session) Do(run uint64, f func(c *imapclient.Client) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		stale := s.run != run
		select {
		case <-s.client.Closed():
			stale = true
		default:
		}
		if stale {
			s.end()
			s.client, s.end = nil, nil
		}
	}
	if s.client == nil {
		c, end, err := s.dial()
		if err != nil {
			return err
		}
		s.client, s.end, s.run = c, end, run
	}
	return f(s.client)
}

// Owner returns the Owner that runs each operation with Do in the
// server's current run, as current reports it, and returns stopped
// instead, dialling nothing, while current says the server does not run.
func (s *Session) Owner(current func() (run uint64, running bool), stopped error) Owner {
	return func(f func(c *imapclient.Client) error) error {
		run, running := current()
		if !running {
			return stopped
		}
		return s.Do(run, f)
	}
}

// Close ends the session's client, if any; a later Do dials again.
func (s *Session) Close() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.client != nil {
		s.end()
		s.client, s.end = nil, nil
	}
}

// DialTLS connects to the implicit-TLS listener at addr, verifying it with
// config, and logs in as user with the IMAP LOGIN command (RFC 3501
// §6.2.3).
func DialTLS(addr string, config *tls.Config, user, password string) (*imapclient.Client, error) {
	c, err := imapclient.DialTLS(addr, &imapclient.Options{
		Dialer:    &net.Dialer{Timeout: DialTimeout},
		TLSConfig: config,
	})
	if err != nil {
		return nil, err
	}
	if err := c.Login(user, password).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("login: %w", err)
	}
	return c, nil
}

// Close logs c out, waiting at most 2 s for the server's answer, and
// closes it.
func Close(c *imapclient.Client) {
	done := make(chan struct{})
	go func() {
		_ = c.Logout().Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(logoutWait):
	}
	c.Close()
}
