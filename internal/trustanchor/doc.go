// Package trustanchor loads the certificate authority an account names with
// CertificateTrust AdditionalTrustedAuthority, and decides whether a mail
// server's certificate is trusted under it.
//
// # Loading
//
// Load turns a configured Source into an Anchor. The Source is a secret
// reference, resolved through the secret package afresh on every call, or,
// where the InterpretationMode allows it, the configured value itself.
// ReferenceOnly, the default, reads the value as a <scheme>:<target>
// reference and nothing else; ReferenceOrInline reads a reference as one and
// anything else as material; InlineOnly always reads the value as material.
//
// The encoding is recognized from the material, never declared:
//
//	PEM      CERTIFICATE blocks (other block types ignored)    inline: yes
//	DER      one or more concatenated ASN.1 certificates       inline: no
//	PKCS#12  a PFX bundle, optionally password protected       inline: no
//
// DER and PKCS#12 are binary and have no faithful representation in a
// configuration value, so inline binary material (raw or base64) fails with
// InlineEncodingNotSupported naming the encoding. A bundle's password is
// another secret reference, resolved only when the material is a bundle.
// Material that carries a private key in any encoding is refused with
// TrustAnchorCarriesPrivateKey; a bundle's key bags are recognized by type
// and never decrypted, so no private key is ever materialized.
//
// Every failure is a *LoadError with a stable Failure identity (the
// bracketed name at the end of its text). No error text contains material,
// a reference's target, a path or a password, and the resolved material and
// password buffers are wiped before Load returns. An Anchor holds public
// certificates only; Subject and Fingerprint (SHA-256) identify it for the
// "loaded trust anchor" log line.
//
// # Validation
//
// Anchor.Verify is the trust decision for a server certificate, and the
// anchor is additional, as the setting's name says. The platform's own
// verification runs first, exactly as under SystemTrustStore, so a server
// with a publicly trusted certificate keeps working when an anchor is
// configured. Only a chain-trust failure (no chain to a system root) is
// re-examined: the chain is rebuilt with the anchor as its only root and
// the server's other certificates as path-building candidates, TLS server
// authentication usage is required again, and every certificate must be
// within its validity period. A name mismatch or an expired certificate is
// refused outright, whatever the anchor. Anchor.TLSConfig applies that
// decision to a connection, both through crypto/tls's own verification
// against RootCAs holding the system's roots and the anchor, and through
// VerifyConnection, which runs Verify. Refusals are *ValidationError values
// (or, from crypto/tls's own verification, errors Classify names). Nothing
// in the package, and no field of its configuration, switches validation
// off.
//
// Under CertificateTrust SystemTrustStore this package is not involved: a
// plain tls.Config with ServerName set keeps the platform's validation.
//
// Certificate downloads: none for the anchor. crypto/x509 never fetches a
// missing intermediate from an Authority Information Access URL, so an
// incomplete, server-chosen chain cannot make the client contact a URL of
// the server's choosing; the handshake supplies every intermediate that
// may chain to the anchor. (The platform's own verification, the first
// step, does what the platform does under SystemTrustStore too.)
//
// Revocation: not checked. A private authority typically publishes neither
// a CRL nor an OCSP responder, so an online check would fail every
// connection the feature exists for, and a status-unknown result would have
// to be ignored anyway. A compromised anchor is handled by replacing the
// provisioned material, which the next connection picks up because every
// Load reads the reference again.
package trustanchor
