package trustanchor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"time"
)

// serverAuth is the only usage a mail server's certificate is validated
// for.
var serverAuth = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}

// Verify decides whether presented, the certificates a server sent (its
// own first), is trusted for serverName under CertificateTrust
// AdditionalTrustedAuthority. The anchor is additional to the platform's
// trust, not a replacement for it:
//
//  1. The platform's own verification runs first, exactly as under
//     SystemTrustStore: the system's roots, the server's other certificates
//     as intermediates, TLS server authentication usage, the name and the
//     current time. A server whose certificate a public authority signed
//     keeps working when an anchor is configured.
//  2. Only a chain-trust failure — no chain to a system root could be built
//     (x509.UnknownAuthorityError), or the platform has no roots at all
//     (x509.SystemRootsError) — is re-examined, by rebuilding the chain with
//     the anchor's certificates as the only roots. The other certificates
//     the server sent are path-building candidates, so a server whose
//     certificate an intermediate signed works when it sends the
//     intermediate; they complete a path and gain no trust. TLS server
//     authentication usage is required again (a client certificate from
//     the same private authority is refused), and every certificate in the
//     chain must be within its validity period. Nothing is downloaded:
//     crypto/x509 never fetches a missing issuer from the certificate's
//     Authority Information Access URL. Revocation is not checked; see the
//     package documentation.
//  3. Every other refusal of the platform's verification is final whatever
//     the anchor: a certificate not valid for serverName (DNS names against
//     the DNS SANs, an IP address literal against the IP SANs), an expired
//     or not yet valid certificate, a chain to a system root that does not
//     permit server authentication. An empty serverName and a missing
//     certificate are refused before anything is verified.
//
// There is no option that relaxes any of this. A refusal is a
// *ValidationError naming the failure: CertificateChainUntrusted when
// neither the system's roots nor the anchor vouch for the certificate.
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
	opts := x509.VerifyOptions{
		DNSName:       serverName,
		Roots:         a.systemRoots, // nil: the platform's roots and verifier
		Intermediates: intermediates,
		CurrentTime:   time.Now(),
		KeyUsages:     serverAuth,
	}
	_, err := presented[0].Verify(opts)
	if err == nil {
		return nil
	}
	if chainTrustFailure(err) {
		opts.Roots = a.pool
		_, err = presented[0].Verify(opts)
		if err == nil {
			return nil
		}
	}
	if ve := Classify(err); ve != nil {
		return ve
	}
	return validationFailure(CertificateChainUntrusted, err)
}

// chainTrustFailure reports whether err says only that no chain to a
// trusted root could be built, the one refusal the anchor may overturn.
func chainTrustFailure(err error) bool {
	var (
		uerr x509.UnknownAuthorityError
		serr x509.SystemRootsError
	)
	return errors.As(err, &uerr) || errors.As(err, &serr)
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

// TLSConfig returns a client configuration that trusts the system's roots
// and, in addition, the anchor, for serverName, as Verify decides.
// Validation is on twice over and cannot be switched off:
//
//   - RootCAs holds the system's roots and the anchor's certificates, so
//     crypto/tls's own verification (which it performs because
//     InsecureSkipVerify is false) already refuses a chain that ends at
//     neither, a name mismatch, an expired certificate and a certificate
//     not usable for server authentication. Its refusals are
//     *tls.CertificateVerificationError around a crypto/x509 error;
//     Classify names them.
//   - VerifyConnection then runs Verify, which makes the decision in its
//     order (the platform first, the anchor alone only after a chain-trust
//     failure), independently of the fields of the configuration, so a
//     clone whose RootCAs were replaced, or even one with
//     InsecureSkipVerify set, is still validated for the name given here.
//
// The same configuration serves implicit TLS and STARTTLS. Every call
// returns a new configuration with its own pool.
func (a *Anchor) TLSConfig(serverName string) *tls.Config {
	roots := a.systemPool()
	for _, c := range a.certs {
		roots.AddCert(c)
	}
	return &tls.Config{
		ServerName:       serverName,
		RootCAs:          roots,
		MinVersion:       tls.VersionTLS12,
		VerifyConnection: a.VerifyConnection(serverName),
	}
}

// systemPool returns a copy of the roots Verify's first step trusts: the
// platform's, or none when the platform has none to give.
func (a *Anchor) systemPool() *x509.CertPool {
	if a.systemRoots != nil {
		return a.systemRoots.Clone()
	}
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		return x509.NewCertPool()
	}
	return pool
}
