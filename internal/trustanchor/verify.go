package trustanchor

import (
	"crypto/tls"
	"crypto/x509"
	"time"
)

// serverAuth is the only usage a mail server's certificate is validated
// for.
var serverAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}

// Verify decides whether presented, the certificates a server sent (its
// own first), is trusted for serverName under the anchor. This is the whole
// decision, not a second opinion on the platform's:
//
//   - The chain is rebuilt with the anchor's certificates as the only roots.
//     No system root takes part.
//   - The other certificates the server sent are path-building candidates,
//     so a server whose certificate an intermediate signed works when it
//     sends the intermediate. They complete a path; they gain no trust.
//   - The certificate must be usable for TLS server authentication, which a
//     client certificate from the same private authority is not.
//   - serverName must match: a DNS name against the DNS SANs, an IP address
//     literal against the IP SANs. A mismatch, an empty serverName and a
//     missing certificate are refused outright and never re-examined.
//   - Validity is checked against the current time, for every certificate
//     in the chain.
//   - Nothing is downloaded: crypto/x509 never fetches a missing issuer
//     from the certificate's Authority Information Access URL. Revocation is
//     not checked; see the package documentation.
//
// There is no option that relaxes any of this. A refusal is a
// *ValidationError.
func (a *Anchor) Verify(serverName string, presented []*x509.Certificate) error {
	if len(presented) == 0 || presented[0] == nil {
		return validationFailure(ServerCertificateUnavailable, nil)
	}
	if serverName == "" {
		return &ValidationError{Failure: ServerNameMismatch, Reason: "there is no server name to check the certificate against"}
	}
	intermediates := x509.NewCertPool()
	for _, c := range presented[1:] {
		if c != nil {
			intermediates.AddCert(c)
		}
	}
	_, err := presented[0].Verify(x509.VerifyOptions{
		DNSName:       serverName,
		Roots:         a.pool,
		Intermediates: intermediates,
		CurrentTime:   time.Now(),
		KeyUsages:     serverAuth,
	})
	if err == nil {
		return nil
	}
	if ve := Classify(err); ve != nil {
		return ve
	}
	return validationFailure(CertificateChainUntrusted, err)
}

// VerifyConnection returns a tls.Config.VerifyConnection callback that
// runs Verify for serverName on the certificates the server sent. When
// serverName is empty the connection's own ServerName is used, and when
// that is empty too the connection is refused. A refusal is returned as a
// *tls.CertificateVerificationError whose Err is the *ValidationError, the
// shape crypto/tls gives its own verification failures, so callers that
// classify handshake errors treat both alike.
func (a *Anchor) VerifyConnection(serverName string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		name := serverName
		if name == "" {
			name = cs.ServerName
		}
		if err := a.Verify(name, cs.PeerCertificates); err != nil {
			return &tls.CertificateVerificationError{UnverifiedCertificates: cs.PeerCertificates, Err: err}
		}
		return nil
	}
}

// TLSConfig returns a client configuration that trusts the anchor alone for
// serverName. Validation is on twice over and cannot be switched off:
//
//   - RootCAs holds only the anchor's certificates, so crypto/tls's own
//     verification (which it performs because InsecureSkipVerify is false)
//     already builds the chain to the anchor as sole root, with the
//     server's certificates as intermediates, serverAuth usage, the name
//     and the current time. Its refusals are *tls.CertificateVerificationError
//     around a crypto/x509 error; Classify names them.
//   - VerifyConnection runs Verify again, independently of the fields of the
//     configuration, so a clone whose RootCAs were replaced, or even one with
//     InsecureSkipVerify set, still validates against the anchor for the
//     name given here.
//
// The same configuration serves implicit TLS and STARTTLS. Every call
// returns a new configuration with its own copy of the pool.
func (a *Anchor) TLSConfig(serverName string) *tls.Config {
	return &tls.Config{
		ServerName:       serverName,
		RootCAs:          a.pool.Clone(),
		MinVersion:       tls.VersionTLS12,
		VerifyConnection: a.VerifyConnection(serverName),
	}
}
