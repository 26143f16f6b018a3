package testca

import (
	"crypto/x509"
	"fmt"

	"software.sslmate.com/src/go-pkcs12"
)

// PKCS12Password is the password Bundle.WriteFiles protects ca.p12 with.
const PKCS12Password = "mailfathom"

// PKCS12 returns ca's certificate as a PKCS #12 trust store (certificates
// only, no key) protected by password, encrypted with AES-256-CBC/PBKDF2 and
// a SHA-256 MAC as OpenSSL 3 and Java read it.
func (ca *CA) PKCS12(password string) ([]byte, error) {
	der, err := pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.Cert}, password)
	if err != nil {
		return nil, fmt.Errorf("testca: encode PKCS #12: %w", err)
	}
	return der, nil
}
