package push

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// secretsDigest digests the material behind the account's configured
// secret references — password, refresh token, trust anchor — as they
// resolve now. The digest is kept in memory only, never logged or stored.
// A reference that does not resolve contributes its failure, so a secret
// that disappears is a change too.
func (wt *watch) secretsDigest(ctx context.Context) [sha256.Size]byte {
	h := sha256.New()
	a := wt.account
	for _, ref := range []secret.Reference{a.Password, a.OAuth.RefreshToken, a.TransportSecurity.TrustedCertificateAuthority} {
		if ref.IsZero() {
			h.Write([]byte{0})
			continue
		}
		b, err := wt.opts.Env.Resolver.Resolve(ctx, ref)
		if err != nil {
			h.Write([]byte{1})
			continue
		}
		h.Write([]byte{2})
		_, _ = fmt.Fprintf(h, "%d:", len(b))
		h.Write(b)
		clear(b)
	}
	var d [sha256.Size]byte
	h.Sum(d[:0])
	return d
}

// rotated reports whether the account's secrets changed since digest was
// taken: the session opened with them is then closed and reopened, so a
// revoked credential never outlives the file it came from.
func (wt *watch) rotated(ctx context.Context, digest [sha256.Size]byte) bool {
	return wt.secretsDigest(ctx) != digest
}
