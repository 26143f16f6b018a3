package trustanchor_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/stretchr/testify/require"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
	"github.com/mailfathom/mailfathom/internal/trustanchor"
)

const p12Password = "bundle-pw-8d2f"

// dialIMAP connects with implicit TLS using cfg, as the IMAP adapter does,
// and proves the session works by logging in and asking for capabilities.
func dialIMAP(addr string, cfg *tls.Config, user, pass string) error {
	c, err := imapclient.DialTLS(addr, &imapclient.Options{
		Dialer:    &net.Dialer{Timeout: 10 * time.Second},
		TLSConfig: cfg,
	})
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.Login(user, pass).Wait(); err != nil {
		return err
	}
	_, err = c.Capability().Wait()
	return err
}

// anchorFiles writes ca's root in every encoding and returns references to
// them.
type anchorFiles struct {
	pem, der, p12, p12NoPassword, password, pemWithKey secret.Reference
}

func writeAnchorFiles(t *testing.T, ca *testca.Bundle) anchorFiles {
	t.Helper()
	dir := t.TempDir()
	write := func(name string, data []byte) secret.Reference {
		path := filepath.Join(dir, name)
		require.NoError(t, os.WriteFile(path, data, 0o600))
		return secret.Reference{Scheme: secret.SchemeFile, Target: path}
	}
	p12, err := ca.CA.PKCS12(p12Password)
	require.NoError(t, err)
	unprotected, err := pkcs12.Passwordless.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert}, "")
	require.NoError(t, err)
	return anchorFiles{
		pem:           write("ca.pem", ca.CA.CertPEM),
		der:           write("ca.der", ca.CA.DER()),
		p12:           write("ca.p12", p12),
		p12NoPassword: write("ca-unprotected.p12", unprotected),
		password:      write("ca.p12.password", []byte(p12Password+"\n")),
		pemWithKey:    write("server-with-key.pem", append(append([]byte(nil), ca.Server.CertPEM...), ca.Server.KeyPEM...)),
	}
}

func load(t *testing.T, ref secret.Reference, password *secret.Reference) (*trustanchor.Anchor, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return trustanchor.Load(ctx, &secret.Resolver{}, trustanchor.FromReference(ref), password, trustanchor.ReferenceOnly)
}

func requireRefused(t *testing.T, err error, want trustanchor.ValidationFailure) {
	t.Helper()
	require.Error(t, err)
	var verr *tls.CertificateVerificationError
	require.True(t, errors.As(err, &verr), "not a certificate verification failure: %v", err)
	got := trustanchor.Classify(err)
	require.NotNil(t, got, "%v", err)
	require.Equal(t, want, got.Failure, "%v", err)
}

// TestDovecotAcceptsTheHarnessCAUnderAnAnchor: Dovecot presents the harness
// CA's server certificate. An anchor holding that CA is accepted in every
// encoding; the system trust store, which does not hold it, refuses it.
func TestDovecotAcceptsTheHarnessCAUnderAnAnchor(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	srv := dovecot.Start(t, dovecot.WithCA(ca))
	u := srv.AddUser("anchor", "pw")
	files := writeAnchorFiles(t, ca)

	for name, tc := range map[string]struct {
		ref      secret.Reference
		password *secret.Reference
		encoding trustanchor.Encoding
	}{
		"PEM":                      {ref: files.pem, encoding: trustanchor.EncodingPEM},
		"DER":                      {ref: files.der, encoding: trustanchor.EncodingDER},
		"PKCS#12 with password":    {ref: files.p12, password: &files.password, encoding: trustanchor.EncodingPKCS12},
		"PKCS#12 without password": {ref: files.p12NoPassword, encoding: trustanchor.EncodingPKCS12},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			a, err := load(t, tc.ref, tc.password)
			require.NoError(t, err)
			require.Equal(t, tc.encoding, a.Encoding())
			require.Equal(t, ca.CA.Cert.Subject.String(), a.Subject())
			require.NoError(t, dialIMAP(srv.TLSAddr(), a.TLSConfig(dovecot.Host), u.Name(), u.Password()))
		})
	}

	t.Run("refused under the system trust store", func(t *testing.T) {
		t.Parallel()
		err := dialIMAP(srv.TLSAddr(), &tls.Config{ServerName: dovecot.Host, MinVersion: tls.VersionTLS12}, u.Name(), u.Password())
		requireRefused(t, err, trustanchor.CertificateChainUntrusted)
	})

	t.Run("refused under an anchor for another authority", func(t *testing.T) {
		t.Parallel()
		a, err := load(t, writeAnchorFiles(t, testca.New()).pem, nil)
		require.NoError(t, err)
		requireRefused(t, dialIMAP(srv.TLSAddr(), a.TLSConfig(dovecot.Host), u.Name(), u.Password()), trustanchor.CertificateChainUntrusted)
	})

	t.Run("an anchor carrying a private key never loads", func(t *testing.T) {
		t.Parallel()
		a, err := load(t, files.pemWithKey, nil)
		require.Nil(t, a)
		require.ErrorIs(t, err, &trustanchor.LoadError{Failure: trustanchor.TrustAnchorCarriesPrivateKey})
	})
}

// TestDovecotRefusesBadCertificates: Dovecot presents a certificate that is
// wrong in exactly one respect; the anchor refuses each with its identity.
// An intermediate the server sends completes the chain.
func TestDovecotRefusesBadCertificates(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	files := writeAnchorFiles(t, ca)
	for name, tc := range map[string]struct {
		leaf *testca.Leaf
		want trustanchor.ValidationFailure // "" means accepted
	}{
		"another authority":            {leaf: ca.OtherCAServer(), want: trustanchor.CertificateChainUntrusted},
		"wrong name":                   {leaf: ca.WrongNameServer(), want: trustanchor.ServerNameMismatch},
		"client authentication only":   {leaf: ca.ClientAuthOnlyServer(), want: trustanchor.CertificateNotUsableForServerAuthentication},
		"intermediate sent by Dovecot": {leaf: ca.IntermediateServer()},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			srv := dovecot.Start(t, dovecot.WithCA(ca), dovecot.WithCertificate(tc.leaf))
			u := srv.AddUser("anchor", "pw")
			for _, ref := range []secret.Reference{files.pem, files.der} {
				a, err := load(t, ref, nil)
				require.NoError(t, err)
				err = dialIMAP(srv.TLSAddr(), a.TLSConfig(dovecot.Host), u.Name(), u.Password())
				if tc.want == "" {
					require.NoError(t, err)
					continue
				}
				requireRefused(t, err, tc.want)
			}
		})
	}
}

// platformHelper names the environment variable that makes
// TestDovecotPublicCertificateUnderAnAnchor run its checks in the process
// it re-executed; its value is the directory holding the anchors.
const platformHelper = "TRUSTANCHOR_PLATFORM_HELPER"

// TestDovecotPublicCertificateUnderAnAnchor: with an anchor configured, a
// server whose certificate the platform's own trust store vouches for
// still connects; a server under the anchor connects too; a name mismatch
// is refused although the platform trusts the certificate; and a server
// under neither is refused.
//
// The platform's trust store must hold the "public" test authority, so the
// checks run in this test binary re-executed with SSL_CERT_FILE naming that
// authority alone (and SSL_CERT_DIR an empty directory): crypto/x509 reads
// the system roots once per process, so they cannot be changed in this
// one.
func TestDovecotPublicCertificateUnderAnAnchor(t *testing.T) {
	if dir := os.Getenv(platformHelper); dir != "" {
		runPlatformChecks(t, dir)
		return
	}
	t.Parallel()
	public, private, other := testca.New(), testca.New(), testca.New()
	publicSrv := dovecot.Start(t, dovecot.WithCA(public))
	privateSrv := dovecot.Start(t, dovecot.WithCA(private))
	publicSrv.AddUser("anchor", "pw")
	privateSrv.AddUser("anchor", "pw")

	dir := t.TempDir()
	for name, pem := range map[string][]byte{"public.pem": public.CA.CertPEM, "private.pem": private.CA.CertPEM, "other.pem": other.CA.CertPEM} {
		require.NoError(t, os.WriteFile(filepath.Join(dir, name), pem, 0o600))
	}
	require.NoError(t, os.Mkdir(filepath.Join(dir, "no-certificates"), 0o700))

	cmd := exec.Command(os.Args[0], "-test.run=^TestDovecotPublicCertificateUnderAnAnchor$", "-test.v")
	cmd.Env = append(os.Environ(),
		platformHelper+"="+dir,
		"TRUSTANCHOR_PUBLIC_SERVER="+publicSrv.TLSAddr(),
		"TRUSTANCHOR_PRIVATE_SERVER="+privateSrv.TLSAddr(),
		"SSL_CERT_FILE="+filepath.Join(dir, "public.pem"),
		"SSL_CERT_DIR="+filepath.Join(dir, "no-certificates"),
	)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)
	require.Contains(t, string(out), "platform checks done", "the checks ran: %s", out)
}

func runPlatformChecks(t *testing.T, dir string) {
	anchor := func(name string) *trustanchor.Anchor {
		a, err := load(t, secret.Reference{Scheme: secret.SchemeFile, Target: filepath.Join(dir, name)}, nil)
		require.NoError(t, err)
		return a
	}
	private, other := anchor("private.pem"), anchor("other.pem")
	publicAddr, privateAddr := os.Getenv("TRUSTANCHOR_PUBLIC_SERVER"), os.Getenv("TRUSTANCHOR_PRIVATE_SERVER")

	// The platform's roots alone, as under SystemTrustStore.
	require.NoError(t, dialIMAP(publicAddr, &tls.Config{ServerName: dovecot.Host, MinVersion: tls.VersionTLS12}, "anchor", "pw"),
		"the platform trusts the public authority")

	require.NoError(t, dialIMAP(publicAddr, private.TLSConfig(dovecot.Host), "anchor", "pw"),
		"a publicly trusted server works with an anchor configured")
	require.NoError(t, dialIMAP(privateAddr, private.TLSConfig(dovecot.Host), "anchor", "pw"),
		"a server under the anchor works")
	requireRefused(t, dialIMAP(publicAddr, private.TLSConfig(testca.WrongHost), "anchor", "pw"), trustanchor.ServerNameMismatch)
	requireRefused(t, dialIMAP(privateAddr, other.TLSConfig(dovecot.Host), "anchor", "pw"), trustanchor.CertificateChainUntrusted)
	t.Log("platform checks done")
}
