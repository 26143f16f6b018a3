// Package testca generates certificate authorities and certificates for
// tests: a root CA and a server certificate for the loopback names by
// default, and the broken variants that TLS tests need (a certificate from an
// unrelated CA, one for the wrong name, one without the serverAuth extended
// key usage, and one issued by an intermediate CA).
//
// Everything is generated in memory with ECDSA P-256 keys, which takes well
// under a millisecond per certificate, and is written to disk only when a
// caller asks for files. Certificates are valid from one hour before
// generation for 30 days (CAs for ten years), so clock skew between the test
// and the server it configures does not matter.
//
// The package is for tests only. Keys are not protected, serial numbers are
// random but not checked for uniqueness, and there is no revocation (no CRL
// distribution points, no OCSP).
//
// Generation panics instead of returning errors: with the fixed templates
// used here the only possible failure is the system's random source, which
// crypto/rand already treats as fatal.
package testca
