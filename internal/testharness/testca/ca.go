package testca

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"time"
)

// CA is a certificate authority that issues test certificates. A CA is
// either a self-signed root or an intermediate issued by another CA.
//
// A CA is safe for concurrent use; its fields must not be modified.
type CA struct {
	// Cert is the CA's certificate.
	Cert *x509.Certificate
	// Key is the CA's private key.
	Key *ecdsa.PrivateKey
	// CertPEM is Cert as one PEM "CERTIFICATE" block.
	CertPEM []byte
	// KeyPEM is Key as one PEM "PRIVATE KEY" (PKCS #8) block.
	KeyPEM []byte
	// Parent is the CA that issued this one, or nil for a root.
	Parent *CA
}

// NewCA returns a new self-signed root CA with the given common name.
func NewCA(commonName string) *CA {
	key := newKey()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"MailFathom tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(10, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	return newCA(tmpl, tmpl, key, key, nil)
}

// NewIntermediate returns a CA issued by ca. It may issue leaves but no
// further CAs (its path length is zero).
func (ca *CA) NewIntermediate(commonName string) *CA {
	key := newKey()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: commonName, Organization: []string{"MailFathom tests"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.AddDate(5, 0, 0),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLen:            0,
		MaxPathLenZero:        true,
	}
	return newCA(tmpl, ca.Cert, key, ca.Key, ca)
}

func newCA(tmpl, parent *x509.Certificate, key, parentKey *ecdsa.PrivateKey, parentCA *CA) *CA {
	cert := sign(tmpl, parent, &key.PublicKey, parentKey)
	return &CA{
		Cert:    cert,
		Key:     key,
		CertPEM: certPEM(cert),
		KeyPEM:  keyPEM(key),
		Parent:  parentCA,
	}
}

// Root returns the root CA at the top of ca's chain (ca itself for a root).
func (ca *CA) Root() *CA {
	for ca.Parent != nil {
		ca = ca.Parent
	}
	return ca
}

// CertPool returns a new pool holding only ca's certificate. For an
// intermediate that makes the intermediate a trust anchor; use
// Root().CertPool() to trust the chain the usual way.
func (ca *CA) CertPool() *x509.CertPool {
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	return pool
}

// DER returns ca's certificate in DER encoding (what a ".der" or ".cer"
// file holds).
func (ca *CA) DER() []byte {
	return append([]byte(nil), ca.Cert.Raw...)
}

// intermediatesPEM returns the PEM of ca and every CA above it except the
// root: what a server sends after its own certificate.
func (ca *CA) intermediatesPEM() []byte {
	var out []byte
	for c := ca; c.Parent != nil; c = c.Parent {
		out = append(out, c.CertPEM...)
	}
	return out
}

func newKey() *ecdsa.PrivateKey {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		panic("testca: generate key: " + err.Error())
	}
	return key
}

func newSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic("testca: serial number: " + err.Error())
	}
	return n.Add(n, big.NewInt(1))
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, parentKey *ecdsa.PrivateKey) *x509.Certificate {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, parentKey)
	if err != nil {
		panic("testca: create certificate: " + err.Error())
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		panic("testca: parse certificate: " + err.Error())
	}
	return cert
}

func certPEM(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

func keyPEM(key *ecdsa.PrivateKey) []byte {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		panic("testca: marshal key: " + err.Error())
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}
