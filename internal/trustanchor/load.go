package trustanchor

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"log/slog"
	"strings"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// Encoding is a recognized trust anchor encoding.
type Encoding string

// The encodings, recognized from the material itself.
const (
	// EncodingPEM is one or more "CERTIFICATE" PEM blocks, what a
	// certificate authority hands an operator. The only inline encoding.
	EncodingPEM Encoding = "PEM"
	// EncodingDER is one (or several concatenated) ASN.1 DER certificates.
	EncodingDER Encoding = "DER"
	// EncodingPKCS12 is a PKCS#12 (PFX) bundle, optionally password
	// protected.
	EncodingPKCS12 Encoding = "PKCS#12"
)

// Resolver reads the material behind a reference. *secret.Resolver
// implements it; the returned slice belongs to the caller, which wipes it.
type Resolver interface {
	Resolve(ctx context.Context, ref secret.Reference) ([]byte, error)
}

// Anchor is a loaded trust anchor: one or more certificates a server
// certificate may chain to in addition to the system's roots (see Verify).
// It holds no material other than public certificates, and is safe for
// concurrent use.
type Anchor struct {
	certs    []*x509.Certificate
	pool     *x509.CertPool
	encoding Encoding
	// systemRoots stands in for the platform's roots in Verify's first
	// step when not nil; tests set it, Load never does.
	systemRoots *x509.CertPool
}

// Load resolves src (or takes it as written, where mode allows) and loads
// the certificate(s) it holds.
//
// The encoding is recognized from the material: PEM, DER or PKCS#12. A
// PKCS#12 bundle's password is resolved from password, which may be nil or
// the zero Reference when none is configured; it is resolved only when the
// material is a bundle. Both buffers are wiped before Load returns.
//
// Every failure is a *LoadError with one of the Failure identities; its text
// never contains material, a reference's target, a path or a password.
func Load(ctx context.Context, resolver Resolver, src Source, password *secret.Reference, mode InterpretationMode) (*Anchor, error) {
	if !mode.Valid() {
		return nil, fmt.Errorf("trustanchor: unknown interpretation mode %d", int(mode))
	}
	if src.IsZero() {
		return nil, &LoadError{Failure: MaterialMissing, Reason: "no trusted certificate authority is configured"}
	}

	// Read the material the way mode says the configured value is meant.
	ref, isRef := src.Reference()
	text := src.inline
	switch {
	case isRef && mode == InlineOnly:
		// InlineOnly takes the value as written even when it looks like a
		// reference; such text is not PEM and fails as unrecognized.
		isRef, text = false, ref.Scheme+":"+ref.Target
	case !isRef && mode != InlineOnly:
		// ReferenceOnly reads the value as a reference or not at all;
		// ReferenceOrInline as a reference when it parses as one.
		parsed, err := secret.ParseReference(text)
		switch {
		case err == nil:
			ref, isRef = parsed, true
		case mode == ReferenceOnly:
			return nil, referenceOnlyRefusal(text, err)
		}
	}
	var material []byte
	if isRef {
		m, err := resolver.Resolve(ctx, ref)
		if err != nil {
			return nil, fromSecret(err, false)
		}
		material = m
	} else {
		// A configuration value may carry surrounding blank lines or
		// indentation before the first BEGIN line.
		material = []byte(strings.TrimSpace(text))
	}
	defer clear(material)

	certs, enc, lerr := decode(ctx, resolver, material, password, !isRef)
	if lerr != nil {
		return nil, lerr
	}
	return newAnchor(certs, enc), nil
}

func newAnchor(certs []*x509.Certificate, enc Encoding) *Anchor {
	pool := x509.NewCertPool()
	for _, c := range certs {
		pool.AddCert(c)
	}
	return &Anchor{certs: certs, pool: pool, encoding: enc}
}

// Certificates returns the anchor's certificates, in the order the material
// held them. The slice is a copy; the certificates must not be modified.
func (a *Anchor) Certificates() []*x509.Certificate {
	return append([]*x509.Certificate(nil), a.certs...)
}

// Encoding returns the encoding the anchor was loaded from.
func (a *Anchor) Encoding() Encoding { return a.encoding }

// Subject returns the first certificate's subject as an RFC 2253
// distinguished name. A certificate's subject is public.
func (a *Anchor) Subject() string { return a.certs[0].Subject.String() }

// Fingerprint returns the SHA-256 digest of the first certificate's DER
// encoding in lower-case hex, which is public and is what `openssl x509
// -noout -fingerprint -sha256` prints (there upper-case, colon-separated).
func (a *Anchor) Fingerprint() string { return fingerprint(a.certs[0]) }

// Fingerprints returns the fingerprint of every certificate, in order.
func (a *Anchor) Fingerprints() []string {
	out := make([]string, len(a.certs))
	for i, c := range a.certs {
		out[i] = fingerprint(c)
	}
	return out
}

func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	return hex.EncodeToString(sum[:])
}

// LogValue returns the public identity of the anchor for the "loaded trust
// anchor" log line: the first certificate's subject and fingerprint, the
// encoding, how many certificates it holds and, when more than one, every
// fingerprint.
func (a *Anchor) LogValue() slog.Value {
	attrs := []slog.Attr{
		slog.String("subject", a.Subject()),
		slog.String("fingerprint", a.Fingerprint()),
		slog.String("encoding", string(a.encoding)),
		slog.Int("certificates", len(a.certs)),
	}
	if len(a.certs) > 1 {
		attrs = append(attrs, slog.Any("fingerprints", a.Fingerprints()))
	}
	return slog.GroupValue(attrs...)
}

// decode recognizes the encoding of material and parses it. Binary
// encodings are recognized before PEM, by a strict look at the ASN.1
// header, so PEM text can never be mistaken for them.
func decode(ctx context.Context, resolver Resolver, material []byte, password *secret.Reference, inline bool) ([]*x509.Certificate, Encoding, *LoadError) {
	kind := sniff(material)
	if !inline && kind != kindUnknown {
		if restored := restoreTrimmedNewline(material); restored != nil {
			defer clear(restored)
			material = restored
		}
	}
	if inline {
		if kind == kindUnknown && !isPEM(material) {
			kind = sniffBase64(material)
		}
		switch kind {
		case kindPKCS12:
			return nil, EncodingPKCS12, loadFailure(InlineEncodingNotSupported, EncodingPKCS12, "a PKCS#12 bundle is binary and cannot be given as the configuration value itself; provision it as a file and reference it")
		case kindCertificate, kindPrivateKey:
			return nil, EncodingDER, loadFailure(InlineEncodingNotSupported, EncodingDER, "DER material is binary and cannot be given as the configuration value itself; provision it as a file and reference it, or give PEM")
		}
	}

	switch kind {
	case kindCertificate:
		certs, err := x509.ParseCertificates(bytes.Clone(material))
		if err != nil {
			return nil, EncodingDER, notReadable(EncodingDER, "the DER certificate does not parse")
		}
		return certs, EncodingDER, nil
	case kindPrivateKey:
		return nil, EncodingDER, loadFailure(TrustAnchorCarriesPrivateKey, EncodingDER, "the material is a DER private key; a trust anchor is a public certificate only")
	case kindPKCS12:
		certs, lerr := decodeBundle(ctx, resolver, material, password)
		return certs, EncodingPKCS12, lerr
	}

	if isPEM(material) {
		certs, lerr := decodePEM(material)
		return certs, EncodingPEM, lerr
	}
	if !inline && sniffBase64(material) != kindUnknown {
		return nil, "", loadFailure(EncodingNotRecognized, "", "the material is base64 text without PEM armour; decode it to the binary file, or wrap it in BEGIN/END CERTIFICATE lines")
	}
	return nil, "", loadFailure(EncodingNotRecognized, "", "the material is neither PEM nor an ASN.1 DER certificate or PKCS#12 bundle")
}

func decodeBundle(ctx context.Context, resolver Resolver, material []byte, password *secret.Reference) ([]*x509.Certificate, *LoadError) {
	var (
		pw         []byte
		configured = password != nil && !password.IsZero()
	)
	if configured {
		var err error
		pw, err = resolver.Resolve(ctx, *password)
		if err != nil {
			return nil, fromSecret(err, true)
		}
		defer clear(pw)
	}
	return readPKCS12(material, pw, configured)
}

// pemBegin marks the start of a PEM block at the start of a line, the only
// place encoding/pem looks for one.
var pemBegin = []byte("-----BEGIN ")

func isPEM(material []byte) bool { return countPEMBlocks(material) > 0 }

func countPEMBlocks(material []byte) int {
	n := bytes.Count(material, append([]byte("\n"), pemBegin...))
	if bytes.HasPrefix(material, pemBegin) {
		n++
	}
	return n
}

// decodePEM reads every block. A private key anywhere refuses the whole
// material; any block that fails to decode, or a CERTIFICATE block that
// fails to parse, makes it unreadable; other block types (a CRL, a public
// key) are ignored. Blocks encoding/pem silently skips are noticed by
// counting the BEGIN lines.
func decodePEM(material []byte) ([]*x509.Certificate, *LoadError) {
	var (
		certs    []*x509.Certificate
		key      bool
		decoded  int
		unparsed bool
	)
	for rest := material; ; {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		decoded++
		switch {
		case strings.Contains(b.Type, "PRIVATE KEY"):
			key = true
			clear(b.Bytes)
		case b.Type == "CERTIFICATE":
			c, err := x509.ParseCertificate(b.Bytes)
			if err != nil {
				unparsed = true
				break
			}
			certs = append(certs, c)
		case b.Type == "TRUSTED CERTIFICATE":
			// OpenSSL's form: the certificate followed by its trust
			// settings, which are not honoured here.
			_, h, l, ok := header(b.Bytes)
			if !ok || l < 0 || h+l > len(b.Bytes) {
				unparsed = true
				break
			}
			c, err := x509.ParseCertificate(b.Bytes[:h+l])
			if err != nil {
				unparsed = true
				break
			}
			certs = append(certs, c)
		}
	}
	switch {
	case key:
		return nil, loadFailure(TrustAnchorCarriesPrivateKey, EncodingPEM, "the PEM material holds a private key block; a trust anchor is a public certificate only")
	case unparsed:
		return nil, notReadable(EncodingPEM, "a CERTIFICATE block does not hold a parsable certificate")
	case decoded < countPEMBlocks(material) && bytes.Contains(material, []byte(`\n`)):
		return nil, notReadable(EncodingPEM, `a PEM block is malformed; the material contains a literal \n, so its line breaks were escaped once too often`)
	case decoded < countPEMBlocks(material):
		return nil, notReadable(EncodingPEM, "a PEM block is malformed (its BEGIN and END lines or its base64 do not decode)")
	case len(certs) == 0:
		return nil, notReadable(EncodingPEM, "the PEM material holds no CERTIFICATE block")
	}
	return certs, nil
}

// kind is what the ASN.1 header of binary material says it is.
type kind int

const (
	kindUnknown kind = iota
	kindCertificate
	kindPKCS12
	kindPrivateKey
)

// sniff classifies material by its first two ASN.1 elements without parsing
// it: a Certificate is SEQUENCE { SEQUENCE (tbsCertificate) ... }, a PFX is
// SEQUENCE { INTEGER 3, ... }, and PKCS#8, PKCS#1 and SEC 1 private keys are
// SEQUENCE { INTEGER 0 or 1, SEQUENCE | INTEGER | OCTET STRING, ... }.
// Truncated material still classifies, so it is reported as unreadable in
// its encoding rather than as unrecognized.
func sniff(b []byte) kind {
	tag, h, _, ok := header(b)
	if !ok || tag != 0x30 {
		return kindUnknown
	}
	inner := b[h:]
	tag, h, l, ok := header(inner)
	if !ok {
		return kindUnknown
	}
	switch tag {
	case 0x30:
		return kindCertificate
	case 0x02:
		if l != 1 || len(inner) < h+1 {
			return kindUnknown
		}
		switch inner[h] {
		case 3:
			return kindPKCS12
		case 0, 1:
			next, _, _, ok := header(inner[h+1:])
			if ok && (next == 0x30 || next == 0x02 || next == 0x04) {
				return kindPrivateKey
			}
		}
	}
	return kindUnknown
}

// sniffBase64 classifies text that is binary material in base64 without PEM
// armour. The decoded copy is wiped.
func sniffBase64(material []byte) kind {
	compact := make([]byte, 0, len(material))
	for _, c := range material {
		switch c {
		case ' ', '\t', '\r', '\n':
		default:
			compact = append(compact, c)
		}
	}
	defer clear(compact)
	if len(compact) < 8 {
		return kindUnknown
	}
	decoded := make([]byte, base64.StdEncoding.DecodedLen(len(compact)))
	defer clear(decoded)
	n, err := base64.StdEncoding.Decode(decoded, compact)
	if err != nil {
		return kindUnknown
	}
	return sniff(decoded[:n])
}

// restoreTrimmedNewline undoes what secret.Resolver does to binary
// material. The resolver removes one trailing "\n" or "\r\n" so that text
// files written by echo work; a DER or PKCS#12 file whose last byte happens
// to be 0x0A (about one in 256) loses it. The ASN.1 length headers say how
// many bytes the material should have, and the resolver only ever removes
// exactly those one or two bytes, so when the top-level elements declare
// one or two bytes more than are present, the copy returned here has them
// back. It returns nil when nothing is missing (or the lengths say
// something else).
func restoreTrimmedNewline(b []byte) []byte {
	declared := 0
	for declared < len(b) {
		_, h, l, ok := header(b[declared:])
		if !ok || l < 0 {
			return nil
		}
		declared += h + l
	}
	var suffix string
	switch declared - len(b) {
	case 1:
		suffix = "\n"
	case 2:
		suffix = "\r\n"
	default:
		return nil
	}
	out := make([]byte, 0, declared)
	return append(append(out, b...), suffix...)
}

// header reads the tag and length of the ASN.1 element at the start of b:
// the tag byte, the header length and the content length, which is -1 for
// BER's indefinite form. Multi-byte tags are not used by anything read
// here and are refused.
func header(b []byte) (tag byte, hdr, length int, ok bool) {
	if len(b) < 2 || b[0]&0x1f == 0x1f {
		return 0, 0, 0, false
	}
	tag, l := b[0], b[1]
	switch {
	case l < 0x80:
		return tag, 2, int(l), true
	case l == 0x80:
		return tag, 2, -1, true
	}
	n := int(l & 0x7f)
	if n > 4 || len(b) < 2+n {
		return 0, 0, 0, false
	}
	for _, c := range b[2 : 2+n] {
		length = length<<8 | int(c)
	}
	return tag, 2 + n, length, true
}
