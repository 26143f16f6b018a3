package testca

import (
	"crypto/ecdsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"net"
	"time"
)

// LeafOptions describes a certificate for CA.Issue.
type LeafOptions struct {
	// CommonName is the subject's common name. Empty means the first of
	// Hosts. Go and most modern clients ignore it for name checks.
	CommonName string
	// Hosts are DNS names and IP address literals put in the subject
	// alternative names; each entry that parses as an IP address becomes
	// an IP SAN, any other a DNS SAN.
	Hosts []string
	// ExtKeyUsage lists the extended key usages. Nil means serverAuth
	// only. To issue a certificate without serverAuth, pass for example
	// []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}: a certificate with
	// no extended key usage at all is accepted by Go for every purpose, so
	// it would not test the missing usage.
	ExtKeyUsage []x509.ExtKeyUsage
	// NotBefore and NotAfter bound the validity. Zero values mean one hour
	// ago and 30 days from now; set them to make an expired or
	// not-yet-valid certificate.
	NotBefore, NotAfter time.Time
}

// Leaf is an end-entity certificate with its key.
//
// A Leaf is safe for concurrent use; its fields must not be modified.
type Leaf struct {
	// Cert is the certificate.
	Cert *x509.Certificate
	// Key is its private key.
	Key *ecdsa.PrivateKey
	// CertPEM is Cert alone as one PEM block.
	CertPEM []byte
	// ChainPEM is Cert followed by the issuing intermediates, if any, but
	// not the root: what a server is configured to send.
	ChainPEM []byte
	// KeyPEM is Key as one PEM "PRIVATE KEY" (PKCS #8) block.
	KeyPEM []byte
	// Issuer is the CA that signed Cert.
	Issuer *CA
}

// Issue returns a new certificate signed by ca.
func (ca *CA) Issue(opts LeafOptions) *Leaf {
	key := newKey()
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          newSerial(),
		Subject:               pkix.Name{CommonName: opts.CommonName, Organization: []string{"MailFathom tests"}},
		NotBefore:             opts.NotBefore,
		NotAfter:              opts.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           opts.ExtKeyUsage,
		BasicConstraintsValid: true,
	}
	if tmpl.Subject.CommonName == "" && len(opts.Hosts) > 0 {
		tmpl.Subject.CommonName = opts.Hosts[0]
	}
	if tmpl.NotBefore.IsZero() {
		tmpl.NotBefore = now.Add(-time.Hour)
	}
	if tmpl.NotAfter.IsZero() {
		tmpl.NotAfter = now.AddDate(0, 0, 30)
	}
	if tmpl.ExtKeyUsage == nil {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	for _, h := range opts.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	cert := sign(tmpl, ca.Cert, &key.PublicKey, ca.Key)
	leafPEM := certPEM(cert)
	return &Leaf{
		Cert:     cert,
		Key:      key,
		CertPEM:  leafPEM,
		ChainPEM: append(append([]byte(nil), leafPEM...), ca.intermediatesPEM()...),
		KeyPEM:   keyPEM(key),
		Issuer:   ca,
	}
}

// IssueServer returns a serverAuth certificate for hosts signed by ca.
func (ca *CA) IssueServer(hosts ...string) *Leaf {
	return ca.Issue(LeafOptions{Hosts: hosts})
}

// TLSCertificate returns l with its intermediates in the form a
// tls.Config's Certificates field takes.
func (l *Leaf) TLSCertificate() tls.Certificate {
	chain := [][]byte{l.Cert.Raw}
	for c := l.Issuer; c.Parent != nil; c = c.Parent {
		chain = append(chain, c.Cert.Raw)
	}
	return tls.Certificate{Certificate: chain, PrivateKey: l.Key, Leaf: l.Cert}
}
