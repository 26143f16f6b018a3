package push

import (
	"context"
	"crypto/sha256"
	"fmt"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// secretsDigest digests the material behind every secret reference a
// session's login uses, as they resolve now: the password; the OAuth
// client id, client secret and refresh token a token account's access
// token is obtained with; the trust anchor and its bundle's password. The
// digest is kept in memory only, never logged or stored. A reference that
// does not resolve contributes its failure, so a secret that disappears
// is a change too. The caller takes it before opening the session it is
// for, so a secret rotated while the session opened counts as rotated.
func (wt *watch) secretsDigest(ctx context.Context) [sha256.Size]byte {
	h := sha256.New()
	a := wt.account
	for _, ref := range []secret.Reference{
		a.Password,
		a.OAuth.ClientID, a.OAuth.ClientSecret, a.OAuth.RefreshToken,
		a.TransportSecurity.TrustedCertificateAuthority, a.TransportSecurity.TrustedCertificateAuthorityPassword,
	} {
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
