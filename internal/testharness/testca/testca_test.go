package testca_test

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

func verify(b *testca.Bundle, leaf *testca.Leaf, host string, withIntermediates bool) error {
	opts := x509.VerifyOptions{Roots: b.CertPool(), DNSName: host, Intermediates: x509.NewCertPool()}
	if withIntermediates {
		for c := leaf.Issuer; c.Parent != nil; c = c.Parent {
			opts.Intermediates.AddCert(c.Cert)
		}
	}
	_, err := leaf.Cert.Verify(opts)
	return err
}

func TestServerVerifiesForEveryLoopbackName(t *testing.T) {
	t.Parallel()
	b := testca.New()
	for _, h := range testca.ServerHosts {
		require.NoError(t, verify(b, b.Server, h, false), h)
	}
	require.Equal(t, []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, b.Server.Cert.ExtKeyUsage)
	require.Equal(t, "P-256", b.Server.Key.Curve.Params().Name)
	require.True(t, b.CA.Cert.IsCA)
}

func TestVariantsFailVerificationForTheirReason(t *testing.T) {
	t.Parallel()
	b := testca.New()

	var unknown x509.UnknownAuthorityError
	require.ErrorAs(t, verify(b, b.OtherCAServer(), "localhost", true), &unknown)

	var hostErr x509.HostnameError
	require.ErrorAs(t, verify(b, b.WrongNameServer(), "127.0.0.1", true), &hostErr)
	require.NoError(t, verify(b, b.WrongNameServer(), testca.WrongHost, true))

	var invalid x509.CertificateInvalidError
	require.ErrorAs(t, verify(b, b.ClientAuthOnlyServer(), "localhost", true), &invalid)
	require.Equal(t, x509.IncompatibleUsage, invalid.Reason)

	inter := b.IntermediateServer()
	require.NoError(t, verify(b, inter, "127.0.0.1", true))
	require.ErrorAs(t, verify(b, inter, "127.0.0.1", false), &unknown)
	require.NotNil(t, inter.Issuer.Parent)
	require.Same(t, b.CA, inter.Issuer.Root())
}

func TestChainPEMHoldsLeafThenIntermediate(t *testing.T) {
	t.Parallel()
	b := testca.New()
	inter := b.IntermediateServer()
	certs := parsePEMChain(t, inter.ChainPEM)
	require.Len(t, certs, 2)
	require.Equal(t, inter.Cert.Raw, certs[0].Raw)
	require.Equal(t, inter.Issuer.Cert.Raw, certs[1].Raw)
	require.Len(t, parsePEMChain(t, b.Server.ChainPEM), 1)
}

func parsePEMChain(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var block *pem.Block
		block, data = pem.Decode(data)
		if block == nil {
			return out
		}
		require.Equal(t, "CERTIFICATE", block.Type)
		c, err := x509.ParseCertificate(block.Bytes)
		require.NoError(t, err)
		out = append(out, c)
	}
}

// handshake runs a real TLS handshake over loopback TCP between a server
// presenting leaf and a client trusting b, dialing host.
func handshake(t *testing.T, b *testca.Bundle, leaf *testca.Leaf, host string) error {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		s := tls.Server(c, b.ServerTLSConfig(leaf))
		_ = s.SetDeadline(time.Now().Add(5 * time.Second))
		_ = s.Handshake()
	}()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	cfg := b.ClientTLSConfig()
	cfg.ServerName = host
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", port), cfg)
	if conn != nil {
		conn.Close()
	}
	<-done
	return err
}

func TestTLSHandshakes(t *testing.T) {
	t.Parallel()
	b := testca.New()
	require.NoError(t, handshake(t, b, nil, "localhost"))
	require.NoError(t, handshake(t, b, b.IntermediateServer(), "127.0.0.2"))

	var verr *tls.CertificateVerificationError
	for name, leaf := range map[string]*testca.Leaf{
		"other CA":    b.OtherCAServer(),
		"wrong name":  b.WrongNameServer(),
		"client only": b.ClientAuthOnlyServer(),
	} {
		err := handshake(t, b, leaf, "localhost")
		require.Error(t, err, name)
		require.True(t, errors.As(err, &verr), "%s: %v", name, err)
	}
}

func TestEncodingsAndFiles(t *testing.T) {
	t.Parallel()
	b := testca.New()

	der, err := x509.ParseCertificate(b.CA.DER())
	require.NoError(t, err)
	require.True(t, der.Equal(b.CA.Cert))

	p12, err := b.CA.PKCS12("pw")
	require.NoError(t, err)
	certs, err := pkcs12.DecodeTrustStore(p12, "pw")
	require.NoError(t, err)
	require.Len(t, certs, 1)
	require.True(t, certs[0].Equal(b.CA.Cert))
	_, err = pkcs12.DecodeTrustStore(p12, "wrong")
	require.Error(t, err)

	dir := t.TempDir()
	f, err := b.WriteFiles(dir)
	require.NoError(t, err)
	pair, err := tls.LoadX509KeyPair(f.ServerCert, f.ServerKey)
	require.NoError(t, err)
	require.Equal(t, b.Server.Cert.Raw, pair.Certificate[0])
	st, err := os.Stat(f.ServerKey)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), st.Mode().Perm())
	raw, err := os.ReadFile(f.CADER)
	require.NoError(t, err)
	require.Equal(t, b.CA.Cert.Raw, raw)
	raw, err = os.ReadFile(f.CAPKCS12)
	require.NoError(t, err)
	_, err = pkcs12.DecodeTrustStore(raw, testca.PKCS12Password)
	require.NoError(t, err)
	pool := x509.NewCertPool()
	raw, err = os.ReadFile(f.CACert)
	require.NoError(t, err)
	require.True(t, pool.AppendCertsFromPEM(raw))

	certFile, keyFile, err := b.IntermediateServer().WriteFiles(dir, "inter")
	require.NoError(t, err)
	require.Equal(t, filepath.Join(dir, "inter.pem"), certFile)
	pair, err = tls.LoadX509KeyPair(certFile, keyFile)
	require.NoError(t, err)
	require.Len(t, pair.Certificate, 2)
}

func BenchmarkNew(b *testing.B) {
	for b.Loop() {
		testca.New()
	}
}
