package imapx

import (
	"context"
	"errors"
	"time"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// logout ends the session with LOGOUT (RFC 3501 §6.1.3): the server
// answers BYE, then OK, and closes the connection. A server that closes
// right after its BYE has done what was asked.
func (w *wireConn) logout(timeout time.Duration) error {
	err := w.run(context.Background(), timeout, "LOGOUT", "", nil)
	if w.bye && errors.Is(err, wire.ErrServerBye) {
		return nil
	}
	return err
}
