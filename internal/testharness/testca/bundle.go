package testca

import (
	"crypto/tls"
	"crypto/x509"
)

// ServerHosts are the names and addresses Bundle.Server is valid for: every
// way a test reaches a loopback server, including 127.0.0.2, which tests use
// as a second, distinct client or server address.
var ServerHosts = []string{"localhost", "127.0.0.1", "127.0.0.2", "::1"}

// WrongHost is the only name in the certificate WrongNameServer returns.
const WrongHost = "wrong-name.invalid"

// Bundle is a root CA with a server certificate for ServerHosts, plus
// generators for the variants TLS tests need. The variants are generated
// anew on each call.
type Bundle struct {
	// CA is the root CA.
	CA *CA
	// Server is a serverAuth certificate for ServerHosts issued directly
	// by CA.
	Server *Leaf
}

// New returns a new Bundle with a fresh root CA.
func New() *Bundle {
	ca := NewCA("MailFathom test root CA")
	return &Bundle{CA: ca, Server: ca.IssueServer(ServerHosts...)}
}

// CertPool returns a new pool that trusts only b's root CA.
func (b *Bundle) CertPool() *x509.CertPool {
	return b.CA.CertPool()
}

// ClientTLSConfig returns a client configuration that trusts only b's root
// CA. ServerName is left empty, so crypto/tls and imapclient take it from the
// dialed address.
func (b *Bundle) ClientTLSConfig() *tls.Config {
	return &tls.Config{RootCAs: b.CertPool(), MinVersion: tls.VersionTLS12}
}

// ServerTLSConfig returns a server configuration presenting leaf, or
// b.Server when leaf is nil.
func (b *Bundle) ServerTLSConfig(leaf *Leaf) *tls.Config {
	if leaf == nil {
		leaf = b.Server
	}
	return &tls.Config{Certificates: []tls.Certificate{leaf.TLSCertificate()}, MinVersion: tls.VersionTLS12}
}

// OtherCAServer returns a certificate for ServerHosts issued by a new root
// CA unrelated to b.CA: valid in every respect except that b does not
// trust it.
func (b *Bundle) OtherCAServer() *Leaf {
	return NewCA("MailFathom unrelated test CA").IssueServer(ServerHosts...)
}

// WrongNameServer returns a serverAuth certificate issued by b.CA that is
// valid only for WrongHost, so verifying it for any of ServerHosts fails
// with a name mismatch.
func (b *Bundle) WrongNameServer() *Leaf {
	return b.CA.IssueServer(WrongHost)
}

// ClientAuthOnlyServer returns a certificate for ServerHosts issued by
// b.CA whose only extended key usage is clientAuth, so verifying it as a
// server certificate fails.
func (b *Bundle) ClientAuthOnlyServer() *Leaf {
	return b.CA.Issue(LeafOptions{Hosts: ServerHosts, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}})
}

// IntermediateServer returns a certificate for ServerHosts issued by a new
// intermediate CA under b.CA. Its ChainPEM and TLSCertificate carry the
// intermediate, so a server configured with them verifies against
// b.CertPool(); a server sending CertPEM alone does not.
func (b *Bundle) IntermediateServer() *Leaf {
	return b.CA.NewIntermediate("MailFathom test intermediate CA").IssueServer(ServerHosts...)
}
