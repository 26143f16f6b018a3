package wire

import (
	"context"
	"strings"
	"time"
)

// Enable sends ENABLE with the given extensions (RFC 5161 §3.1) and returns
// those the server's ENABLED response (RFC 5161 §3.2) names: an extension
// is on only once the server says so, and Enabled remembers it for the
// connection. ENABLE is valid only in the authenticated state, and RFC 7162
// §3.2.3 requires a client that uses QRESYNC to issue ENABLE QRESYNC once
// it is authenticated, before it opens a folder.
//
// A NO or BAD is a *CommandError and leaves the connection usable, with
// nothing enabled.
func (c *Conn) Enable(ctx context.Context, timeout time.Duration, extensions ...string) (map[string]bool, error) {
	enabled := map[string]bool{}
	err := c.run(ctx, timeout, "ENABLE", strings.Join(extensions, " "), func(r *Response) {
		if r.Kind != RespEnabled {
			return
		}
		for _, ext := range r.Caps {
			enabled[strings.ToUpper(ext)] = true
		}
	})
	if err != nil {
		return nil, err
	}
	for ext := range enabled {
		c.enabled[ext] = true
	}
	return enabled, nil
}

// Enabled reports whether the server confirmed extension, such as
// "QRESYNC", in answer to an Enable on this connection.
func (c *Conn) Enabled(extension string) bool { return c.enabled[strings.ToUpper(extension)] }
