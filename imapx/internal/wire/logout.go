package wire

import (
	"context"
	"errors"
	"time"
)

// Logout ends the session with LOGOUT (RFC 3501 §6.1.3): the server
// answers BYE, then OK, and closes the connection. A server that closes
// right after its BYE has done what was asked. Logout does not close the
// socket; Close does.
func (c *Conn) Logout(timeout time.Duration) error {
	err := c.run(context.Background(), timeout, "LOGOUT", "", nil)
	if c.bye && errors.Is(err, ErrServerBye) {
		return nil
	}
	return err
}
