package trustanchor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// Failure is the stable identity of a load failure. Operators and log
// queries match on it; the surrounding prose may change.
type Failure string

// The load failure identities.
const (
	// MaterialMissing: the block carries no reference (and no inline value)
	// at all.
	MaterialMissing Failure = "MaterialMissing"
	// SecretNotResolvable: the reference, or the bundle password's
	// reference, produced no material.
	SecretNotResolvable Failure = "SecretNotResolvable"
	// ReferenceMalformed: the configured value is read as a reference (the
	// interpretation mode says so) and is not a well-formed one. It is the
	// secret package's identity, passed through, and is also what inline
	// material gets under ReferenceOnly.
	ReferenceMalformed Failure = Failure(secret.ReferenceMalformed)
	// EncodingNotRecognized: the material is neither PEM nor an ASN.1
	// certificate or bundle.
	EncodingNotRecognized Failure = "EncodingNotRecognized"
	// InlineEncodingNotSupported: binary material (DER or PKCS#12, raw or
	// base64) was supplied as the configuration value itself.
	InlineEncodingNotSupported Failure = "InlineEncodingNotSupported"
	// MaterialNotReadable: the encoding is supported but the material does
	// not parse.
	MaterialNotReadable Failure = "MaterialNotReadable"
	// BundlePasswordMissing: the bundle is protected and no password
	// reference was configured.
	BundlePasswordMissing Failure = "BundlePasswordMissing"
	// BundlePasswordIncorrect: the bundle did not open with the configured
	// password.
	BundlePasswordIncorrect Failure = "BundlePasswordIncorrect"
	// BundleCarriesNoCertificate: the bundle opened but holds no
	// certificate.
	BundleCarriesNoCertificate Failure = "BundleCarriesNoCertificate"
	// TrustAnchorCarriesPrivateKey: the material carries a private key.
	TrustAnchorCarriesPrivateKey Failure = "TrustAnchorCarriesPrivateKey"
)

// LoadError is a trust anchor load failure. Its text names the part that
// failed (the anchor or its bundle password), the encoding or scheme when
// known, a fixed reason and the failure identity in brackets. It never
// contains material, a reference's target, a path or a password.
type LoadError struct {
	// Failure is the stable failure identity.
	Failure Failure
	// Encoding is the recognized encoding, or empty when none was (or the
	// failure happened before the material was read).
	Encoding Encoding
	// Password reports that the failure concerns the bundle password's
	// reference rather than the anchor's own.
	Password bool
	// Reason is a fixed, operator-facing explanation.
	Reason string
	// cause is a *secret.Error (whose text is already free of targets and
	// material), or nil.
	cause error
}

// Error implements error.
func (e *LoadError) Error() string {
	var b strings.Builder
	b.WriteString("trust anchor")
	if e.Password {
		b.WriteString(" bundle password")
	}
	var se *secret.Error
	switch {
	case e.Encoding != "":
		b.WriteString(" (" + string(e.Encoding) + ")")
	case errors.As(e.cause, &se) && se.Scheme != "":
		b.WriteString(" (" + se.Scheme + ":)")
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	return failure.Text(b.String(), string(e.Failure))
}

// Identity implements failure.Named.
func (e *LoadError) Identity() string { return string(e.Failure) }

// Unwrap returns the *secret.Error behind a resolution failure, if any.
func (e *LoadError) Unwrap() error { return e.cause }

// Is reports whether target is a *LoadError with the same Failure (and, when
// the target sets it, the same Encoding), so errors.Is(err,
// &trustanchor.LoadError{Failure: trustanchor.BundlePasswordMissing}) works.
func (e *LoadError) Is(target error) bool {
	t, ok := target.(*LoadError)
	return ok && t.Failure == e.Failure && (t.Encoding == "" || t.Encoding == e.Encoding) && t.Reason == ""
}

func loadFailure(f Failure, enc Encoding, reason string) *LoadError {
	return &LoadError{Failure: f, Encoding: enc, Reason: reason}
}

func notReadable(enc Encoding, reason string) *LoadError {
	return loadFailure(MaterialNotReadable, enc, reason)
}

// fromSecret turns a resolver failure into a LoadError. The secret
// package's text is already free of targets and material, so its reason is
// kept.
func fromSecret(err error, password bool) *LoadError {
	var se *secret.Error
	if !errors.As(err, &se) {
		// A Resolver that is not *secret.Resolver returned something else;
		// its text is not known to be safe, so it is not repeated.
		return &LoadError{Failure: SecretNotResolvable, Password: password, Reason: "the reference produced no material"}
	}
	f := SecretNotResolvable
	switch se.Failure {
	case secret.MaterialMissing:
		f = MaterialMissing
	case secret.ReferenceMalformed:
		f = ReferenceMalformed
	}
	return &LoadError{Failure: f, Password: password, Reason: se.Reason, cause: se}
}

// ValidationFailure is the stable identity of a refused server certificate.
type ValidationFailure string

// The validation failure identities.
const (
	// ServerCertificateUnavailable: the server presented no certificate.
	ServerCertificateUnavailable ValidationFailure = "ServerCertificateUnavailable"
	// ServerNameMismatch: the certificate is not valid for the name the
	// client connected to, or there was no name to check. Never forgiven.
	ServerNameMismatch ValidationFailure = "ServerNameMismatch"
	// CertificateChainUntrusted: no chain from the certificate to a system
	// root or, under AdditionalTrustedAuthority, to the anchor could be
	// built.
	CertificateChainUntrusted ValidationFailure = "CertificateChainUntrusted"
	// CertificateNotUsableForServerAuthentication: a chain exists but the
	// certificate (or a CA on the way) does not permit TLS server
	// authentication, such as a client-only certificate from the same CA.
	CertificateNotUsableForServerAuthentication ValidationFailure = "CertificateNotUsableForServerAuthentication"
	// CertificateExpired: the certificate, or a certificate in its chain,
	// is outside its validity period (expired or not yet valid).
	CertificateExpired ValidationFailure = "CertificateExpired"
)

// ValidationError reports a server certificate that was refused. Its text
// is fixed per identity; Unwrap returns the crypto/x509 error with the
// details (which names only public certificate contents).
type ValidationError struct {
	// Failure is the stable failure identity.
	Failure ValidationFailure
	// Reason is a fixed, operator-facing explanation.
	Reason string
	cause  error
}

// Error implements error.
func (e *ValidationError) Error() string {
	return failure.Text("server certificate: "+e.Reason, string(e.Failure))
}

// Identity implements failure.Named.
func (e *ValidationError) Identity() string { return string(e.Failure) }

// Unwrap returns the underlying crypto/x509 error, if any, so callers that
// classify x509.HostnameError or x509.UnknownAuthorityError keep working.
func (e *ValidationError) Unwrap() error { return e.cause }

// Is reports whether target is a *ValidationError with the same Failure.
func (e *ValidationError) Is(target error) bool {
	t, ok := target.(*ValidationError)
	return ok && t.Failure == e.Failure && t.Reason == ""
}

// Classify returns the *ValidationError a failed TLS handshake or
// verification corresponds to, or nil when err is not a certificate
// verification failure (a network error, a protocol alert, nil).
//
// It recognizes both this package's own errors and the crypto/x509 errors
// crypto/tls reports when its built-in verification refuses a chain, which
// is what a handshake under Anchor.TLSConfig reports (crypto/tls verifies
// against RootCAs holding the system's roots and the anchor before
// VerifyConnection runs) and what a plain tls.Config reports under
// SystemTrustStore.
func Classify(err error) *ValidationError {
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if errors.As(err, &ve) {
		return ve
	}
	var (
		herr  x509.HostnameError
		uerr  x509.UnknownAuthorityError
		cerr  x509.CertificateInvalidError
		serr  x509.SystemRootsError
		verr  *tls.CertificateVerificationError
		cause = err
	)
	if errors.As(err, &verr) && verr.Err != nil {
		cause = verr.Err
	}
	switch {
	case errors.As(err, &herr):
		return validationFailure(ServerNameMismatch, cause)
	case errors.As(err, &cerr):
		switch cerr.Reason {
		case x509.Expired:
			return validationFailure(CertificateExpired, cause)
		case x509.IncompatibleUsage:
			return validationFailure(CertificateNotUsableForServerAuthentication, cause)
		}
		return validationFailure(CertificateChainUntrusted, cause)
	case errors.As(err, &uerr), errors.As(err, &serr), verr != nil:
		return validationFailure(CertificateChainUntrusted, cause)
	}
	return nil
}

func validationFailure(f ValidationFailure, cause error) *ValidationError {
	var reason string
	switch f {
	case ServerCertificateUnavailable:
		reason = "the server presented no certificate"
	case ServerNameMismatch:
		reason = "the certificate is not valid for the server name connected to"
	case CertificateChainUntrusted:
		reason = "the certificate does not chain to a trusted authority"
	case CertificateNotUsableForServerAuthentication:
		reason = "the certificate is not usable for TLS server authentication"
	case CertificateExpired:
		reason = "the certificate or a certificate in its chain is outside its validity period"
		var cerr x509.CertificateInvalidError
		if errors.As(cause, &cerr) && cerr.Cert != nil {
			if time.Now().Before(cerr.Cert.NotBefore) {
				reason = "the certificate or a certificate in its chain is not yet valid"
			} else {
				reason = "the certificate or a certificate in its chain has expired"
			}
		}
	}
	return &ValidationError{Failure: f, Reason: reason, cause: cause}
}
