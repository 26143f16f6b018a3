package e2e

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// TestAdditionalAuthorityKeepsThePlatformsTrust: an account configured with
// CERTIFICATE_TRUST=AdditionalTrustedAuthority, naming a private authority,
// still synchronizes from a server whose certificate an authority of the
// platform's trust store signed — the configured authority is additional,
// not the only one. The serve process's platform trust store is
// SSL_CERT_FILE naming the "public" test authority alone (SSL_CERT_DIR an
// empty directory), which Dovecot's certificate chains to; the configured
// authority is another one, which signed nothing Dovecot presents.
func TestAdditionalAuthorityKeepsThePlatformsTrust(t *testing.T) {
	t.Parallel()
	public, private := testca.New(), testca.New()
	b := setup(t, pgtest.Database(t), dovecot.WithCA(public))
	u := b.server.NewUser()
	seedCorpus(t, u, "INBOX", 12, 5, 8)
	b.addAccount(t, "primary", u)

	privateFile := filepath.Join(b.dir, "private-ca.pem")
	require.NoError(t, os.WriteFile(privateFile, private.CA.CertPEM, 0o644))
	noCertificates := filepath.Join(b.dir, "no-certificates")
	require.NoError(t, os.Mkdir(noCertificates, 0o755))
	b.env["MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST"] = "AdditionalTrustedAuthority"
	b.env["MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY"] = "file:" + privateFile
	b.env["SSL_CERT_FILE"] = b.caFile // the public authority's certificate
	b.env["SSL_CERT_DIR"] = noCertificates

	p := b.start(t, "serve")
	b.waitStored(t, 12, time.Minute)
	require.NotContains(t, p.rawLog(), "MailboxTlsRefused")
}
