package imapx

import (
	"context"
	"strings"
	"time"
)

// enable sends ENABLE with the given extensions (RFC 5161 §3.1) and returns
// those the server's ENABLED response (RFC 5161 §3.2) names: an extension
// is on only once the server says so. ENABLE is valid only in the
// authenticated state, and RFC 7162 §3.2.3 requires a client that uses
// QRESYNC to issue ENABLE QRESYNC once it is authenticated, before it opens
// a folder; the reconciliation connection sends it as its first command.
//
// A NO or BAD is a *CommandError and leaves the connection usable.
func (w *wireConn) enable(ctx context.Context, timeout time.Duration, extensions ...string) (map[string]bool, error) {
	enabled := map[string]bool{}
	err := w.run(ctx, timeout, "ENABLE", strings.Join(extensions, " "), func(r *response) {
		if r.kind != respEnabled {
			return
		}
		for _, c := range r.caps {
			enabled[strings.ToUpper(c)] = true
		}
	})
	if err != nil {
		return nil, err
	}
	return enabled, nil
}
