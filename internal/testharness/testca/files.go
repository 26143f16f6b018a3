package testca

import (
	"fmt"
	"os"
	"path/filepath"
)

// Files are the paths Bundle.WriteFiles wrote.
type Files struct {
	// CACert is the root CA certificate in PEM.
	CACert string
	// CADER is the root CA certificate in DER.
	CADER string
	// CAPKCS12 is the root CA certificate as a PKCS #12 trust store
	// protected by PKCS12Password.
	CAPKCS12 string
	// ServerCert is the server certificate chain in PEM.
	ServerCert string
	// ServerKey is the server private key in PEM (PKCS #8).
	ServerKey string
}

// WriteFiles writes b's root CA (PEM, DER and PKCS #12) and server
// certificate and key into dir, which must exist, as ca.pem, ca.der,
// ca.p12, server.pem and server.key. Certificates are mode 0644, the key
// 0600.
func (b *Bundle) WriteFiles(dir string) (Files, error) {
	p12, err := b.CA.PKCS12(PKCS12Password)
	if err != nil {
		return Files{}, err
	}
	f := Files{
		CACert:     filepath.Join(dir, "ca.pem"),
		CADER:      filepath.Join(dir, "ca.der"),
		CAPKCS12:   filepath.Join(dir, "ca.p12"),
		ServerCert: filepath.Join(dir, "server.pem"),
		ServerKey:  filepath.Join(dir, "server.key"),
	}
	for _, w := range []struct {
		path string
		data []byte
		mode os.FileMode
	}{
		{f.CACert, b.CA.CertPEM, 0o644},
		{f.CADER, b.CA.DER(), 0o644},
		{f.CAPKCS12, p12, 0o644},
		{f.ServerCert, b.Server.ChainPEM, 0o644},
		{f.ServerKey, b.Server.KeyPEM, 0o600},
	} {
		if err := os.WriteFile(w.path, w.data, w.mode); err != nil {
			return Files{}, fmt.Errorf("testca: %w", err)
		}
	}
	return f, nil
}

// WriteFiles writes l's chain (ChainPEM) to dir/name.pem and its key to
// dir/name.key, mode 0644 and 0600, and returns the two paths.
func (l *Leaf) WriteFiles(dir, name string) (certFile, keyFile string, err error) {
	certFile = filepath.Join(dir, name+".pem")
	keyFile = filepath.Join(dir, name+".key")
	if err := os.WriteFile(certFile, l.ChainPEM, 0o644); err != nil {
		return "", "", fmt.Errorf("testca: %w", err)
	}
	if err := os.WriteFile(keyFile, l.KeyPEM, 0o600); err != nil {
		return "", "", fmt.Errorf("testca: %w", err)
	}
	return certFile, keyFile, nil
}
