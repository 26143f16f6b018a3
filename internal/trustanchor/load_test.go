package trustanchor

import (
	"bytes"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// mustP12 returns an encoder's bundle; encoding fixed test input cannot
// fail.
func mustP12(b []byte, err error) []byte {
	if err != nil {
		panic(err)
	}
	return b
}

func crlf(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n")) }

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

// keyDER returns the PKCS#8 DER of l's key.
func keyDER(t *testing.T, l *testca.Leaf) []byte {
	t.Helper()
	b, _ := pem.Decode(l.KeyPEM)
	require.NotNil(t, b)
	return b.Bytes
}

func TestLoadRecognizesEveryEncoding(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	other := testca.New()
	fixtureCA := func(t *testing.T) []*x509.Certificate {
		b, _ := pem.Decode(readTestdata(t, "ca.pem"))
		c, err := x509.ParseCertificate(b.Bytes)
		require.NoError(t, err)
		return []*x509.Certificate{c}
	}
	harnessCA := func(*testing.T) []*x509.Certificate { return []*x509.Certificate{ca.CA.Cert} }
	fixturePW := strings.TrimSpace(string(readTestdata(t, "password.txt")))

	tests := []struct {
		name     string
		material func(t *testing.T) []byte
		password string // "" means none configured
		want     func(t *testing.T) []*x509.Certificate
		encoding Encoding
	}{
		{name: "PEM", material: func(*testing.T) []byte { return ca.CA.CertPEM }, want: harnessCA, encoding: EncodingPEM},
		{
			name: "PEM with CRLF, surrounding text and a public key block",
			material: func(*testing.T) []byte {
				return crlf(slicesConcat([]byte("subject=CN = MailFathom test root CA\n"), ca.CA.CertPEM,
					pemBlock("PUBLIC KEY", []byte{0x30, 0}), []byte("\n\n")))
			},
			want: harnessCA, encoding: EncodingPEM,
		},
		{
			name:     "PEM with two authorities",
			material: func(*testing.T) []byte { return slicesConcat(ca.CA.CertPEM, other.CA.CertPEM) },
			want: func(*testing.T) []*x509.Certificate {
				return []*x509.Certificate{ca.CA.Cert, other.CA.Cert}
			},
			encoding: EncodingPEM,
		},
		{
			name: "OpenSSL TRUSTED CERTIFICATE",
			material: func(*testing.T) []byte {
				return pemBlock("TRUSTED CERTIFICATE", slicesConcat(ca.CA.DER(), []byte{0x30, 0x00}))
			},
			want: harnessCA, encoding: EncodingPEM,
		},
		{name: "DER", material: func(*testing.T) []byte { return ca.CA.DER() }, want: harnessCA, encoding: EncodingDER},
		{
			name:     "DER, two concatenated",
			material: func(*testing.T) []byte { return slicesConcat(ca.CA.DER(), other.CA.DER()) },
			want: func(*testing.T) []*x509.Certificate {
				return []*x509.Certificate{ca.CA.Cert, other.CA.Cert}
			},
			encoding: EncodingDER,
		},
		{
			name:     "PKCS#12 from testca with password",
			material: func(t *testing.T) []byte { return mustP12(ca.CA.PKCS12(bundlePassword)) },
			password: bundlePassword, want: harnessCA, encoding: EncodingPKCS12,
		},
		{
			name:     "PKCS#12 from testca with the empty password, none configured",
			material: func(t *testing.T) []byte { return mustP12(ca.CA.PKCS12("")) },
			want:     harnessCA, encoding: EncodingPKCS12,
		},
		{
			name: "PKCS#12 passwordless (no MAC, no encryption)",
			material: func(t *testing.T) []byte {
				return mustP12(pkcs12.Passwordless.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert}, ""))
			},
			want: harnessCA, encoding: EncodingPKCS12,
		},
		{
			name: "PKCS#12 passwordless with a password configured anyway",
			material: func(t *testing.T) []byte {
				return mustP12(pkcs12.Passwordless.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert}, ""))
			},
			password: bundlePassword, want: harnessCA, encoding: EncodingPKCS12,
		},
		{
			name: "PKCS#12 go-pkcs12 LegacyRC2",
			material: func(t *testing.T) []byte {
				return mustP12(pkcs12.LegacyRC2.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert}, bundlePassword))
			},
			password: bundlePassword, want: harnessCA, encoding: EncodingPKCS12,
		},
		{
			name: "PKCS#12 go-pkcs12 LegacyDES",
			material: func(t *testing.T) []byte {
				return mustP12(pkcs12.LegacyDES.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert}, bundlePassword))
			},
			password: bundlePassword, want: harnessCA, encoding: EncodingPKCS12,
		},
		{
			name: "PKCS#12 go-pkcs12 Modern2026 (PBMAC1), non-ASCII password",
			material: func(t *testing.T) []byte {
				return mustP12(pkcs12.Modern2026.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert, other.CA.Cert}, "pässwörd-"+sentinel))
			},
			password: "pässwörd-" + sentinel,
			want: func(*testing.T) []*x509.Certificate {
				return []*x509.Certificate{ca.CA.Cert, other.CA.Cert}
			},
			encoding: EncodingPKCS12,
		},
	}
	for _, f := range []struct{ file, password string }{
		{"openssl-aes256.p12", fixturePW},
		{"openssl-aes128-sha384mac.p12", fixturePW},
		{"openssl-pbes2-des3-sha512mac.p12", fixturePW},
		{"openssl-3des-sha1mac.p12", fixturePW},
		{"openssl-2des.p12", fixturePW},
		{"openssl-legacy-rc2-40.p12", fixturePW},
		{"openssl-rc2-128.p12", fixturePW},
		{"openssl-empty-password.p12", ""},
		{"openssl-nomac-unencrypted.p12", ""},
		{"keytool.p12", fixturePW},
	} {
		tests = append(tests, struct {
			name     string
			material func(t *testing.T) []byte
			password string
			want     func(t *testing.T) []*x509.Certificate
			encoding Encoding
		}{
			name:     "PKCS#12 fixture " + f.file,
			material: func(t *testing.T) []byte { return readTestdata(t, f.file) },
			password: f.password, want: fixtureCA, encoding: EncodingPKCS12,
		})
	}

	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			var pw *secret.Reference
			if tt.password != "" {
				pw = fx.password(tt.password)
			}
			a, err := fx.load(FromReference(fx.file("anchor", tt.material(t))), pw, ReferenceOnly)
			require.NoError(t, err)
			want := tt.want(t)
			got := a.Certificates()
			require.Len(t, got, len(want))
			for i := range want {
				require.True(t, want[i].Equal(got[i]), "certificate %d", i)
			}
			require.Equal(t, tt.encoding, a.Encoding())
			require.Equal(t, want[0].Subject.String(), a.Subject())
			sum := sha256.Sum256(want[0].Raw)
			require.Equal(t, hex.EncodeToString(sum[:]), a.Fingerprint())
			require.Len(t, a.Fingerprints(), len(want))
		})
	}
}

func slicesConcat(parts ...[]byte) []byte { return bytes.Join(parts, nil) }

// stripMAC returns a PFX without its MacData, which no encoder at hand
// writes for encrypted content: a bundle whose password only decryption can
// check.
func stripMAC(t *testing.T, der []byte) []byte {
	t.Helper()
	_, h, l, ok := header(der)
	require.True(t, ok)
	body := der[h : h+l]
	var kept []byte
	for i := 0; i < 2; i++ {
		_, eh, el, ok := header(body)
		require.True(t, ok)
		kept = append(kept, body[:eh+el]...)
		body = body[eh+el:]
	}
	require.NotEmpty(t, body, "the PFX had no MAC")
	out, err := asnSequence(kept)
	require.NoError(t, err)
	return out
}

func asnSequence(content []byte) ([]byte, error) {
	if len(content) > 0xffff {
		return nil, fmt.Errorf("too long")
	}
	return slicesConcat([]byte{0x30, 0x82, byte(len(content) >> 8), byte(len(content))}, content), nil
}

func TestLoadFailures(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	fixturePW := strings.TrimSpace(string(readTestdata(t, "password.txt")))
	protected := mustP12(ca.CA.PKCS12(bundlePassword))
	noMACEncrypted := stripMAC(t, mustP12(pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert}, bundlePassword)))
	withKey := mustP12(pkcs12.Modern.Encode(ca.Server.Key, ca.Server.Cert, nil, bundlePassword))
	sec1, err := x509.MarshalECPrivateKey(ca.Server.Key)
	require.NoError(t, err)
	garbageText := []byte("this is not a certificate " + sentinel + "\n")
	b64DER := []byte(base64.StdEncoding.EncodeToString(ca.CA.DER()))

	type source func(fx *fixture) Source
	ref := func(material []byte) source {
		return func(fx *fixture) Source { return FromReference(fx.file("anchor", material)) }
	}
	inline := func(s string) source { return func(*fixture) Source { return FromValue(s) } }
	pwRef := func(pw string) func(fx *fixture) *secret.Reference {
		return func(fx *fixture) *secret.Reference { return fx.password(pw) }
	}

	tests := []struct {
		name     string
		src      source
		password func(fx *fixture) *secret.Reference
		mode     InterpretationMode
		want     Failure
		encoding Encoding
		isPW     bool
	}{
		// MaterialMissing
		{name: "nothing configured", src: func(*fixture) Source { return Source{} }, want: MaterialMissing},
		{name: "blank inline value", src: inline(" \n\t"), mode: ReferenceOrInline, want: MaterialMissing},

		// SecretNotResolvable
		{name: "reference to a missing file", src: func(fx *fixture) Source { return FromReference(fx.missing("ca.pem")) }, want: SecretNotResolvable},
		{name: "empty file", src: ref(nil), want: SecretNotResolvable},
		{name: "unset environment variable", src: func(*fixture) Source {
			return FromReference(secret.Reference{Scheme: secret.SchemeEnv, Target: "TRUSTANCHOR_TEST_UNSET_" + strings.ReplaceAll(sentinel, "-", "_")})
		}, want: SecretNotResolvable},
		{
			name: "bundle password reference missing", src: ref(protected),
			password: func(fx *fixture) *secret.Reference { r := fx.missing("password"); return &r },
			want:     SecretNotResolvable, isPW: true,
		},

		// ReferenceMalformed: the value is read as a reference and is not one.
		{name: "inline PEM under ReferenceOnly", src: inline(string(ca.CA.CertPEM)), want: ReferenceMalformed},
		{name: "text under ReferenceOnly", src: inline(string(garbageText)), want: ReferenceMalformed},

		// EncodingNotRecognized
		{name: "garbage text", src: ref(garbageText), want: EncodingNotRecognized},
		{name: "random bytes", src: ref([]byte{0x00, 0xff, 0x13, 0x37, 0x42, 0x99, 0x01}), want: EncodingNotRecognized},
		{name: "ASN.1 that is neither certificate nor bundle", src: ref([]byte{0x30, 0x03, 0x06, 0x01, 0x00}), want: EncodingNotRecognized},
		{name: "base64 DER without armour", src: ref(b64DER), want: EncodingNotRecognized},
		{name: "inline text under ReferenceOrInline", src: inline(string(garbageText)), mode: ReferenceOrInline, want: EncodingNotRecognized},
		{
			name: "reference text under InlineOnly is material",
			src:  func(fx *fixture) Source { return FromReference(fx.file("anchor", ca.CA.CertPEM)) },
			mode: InlineOnly, want: EncodingNotRecognized,
		},

		// InlineEncodingNotSupported
		{name: "inline DER", src: inline(string(ca.CA.DER())), mode: ReferenceOrInline, want: InlineEncodingNotSupported, encoding: EncodingDER},
		{name: "inline DER under InlineOnly", src: inline(string(ca.CA.DER())), mode: InlineOnly, want: InlineEncodingNotSupported, encoding: EncodingDER},
		{name: "inline base64 DER", src: inline(string(b64DER)), mode: InlineOnly, want: InlineEncodingNotSupported, encoding: EncodingDER},
		{name: "inline PKCS#12", src: inline(string(protected)), mode: ReferenceOrInline, want: InlineEncodingNotSupported, encoding: EncodingPKCS12},
		{name: "inline base64 PKCS#12", src: inline(base64.StdEncoding.EncodeToString(protected)), mode: InlineOnly, want: InlineEncodingNotSupported, encoding: EncodingPKCS12},

		// MaterialNotReadable
		{name: "PEM certificate block holding garbage", src: ref(pemBlock("CERTIFICATE", []byte(sentinel))), want: MaterialNotReadable, encoding: EncodingPEM},
		{name: "PEM with broken base64", src: ref([]byte("-----BEGIN CERTIFICATE-----\n!!!" + sentinel + "\n-----END CERTIFICATE-----\n")), want: MaterialNotReadable, encoding: EncodingPEM},
		{name: "PEM with a good and a broken block", src: ref(slicesConcat(ca.CA.CertPEM, []byte("-----BEGIN CERTIFICATE-----\n@@@\n-----END CERTIFICATE-----\n"))), want: MaterialNotReadable, encoding: EncodingPEM},
		{name: "PEM without a certificate block", src: ref(pemBlock("PUBLIC KEY", []byte{0x30, 0})), want: MaterialNotReadable, encoding: EncodingPEM},
		{name: "truncated DER", src: ref(ca.CA.DER()[:100]), want: MaterialNotReadable, encoding: EncodingDER},
		{name: "truncated PKCS#12", src: ref(protected[:len(protected)/2]), password: pwRef(bundlePassword), want: MaterialNotReadable, encoding: EncodingPKCS12},
		{name: "inline PEM with doubly escaped newlines", src: inline(strings.ReplaceAll(string(ca.CA.CertPEM), "\n", `\n`)), mode: InlineOnly, want: MaterialNotReadable, encoding: EncodingPEM},
		{name: "inline PEM that does not parse", src: inline("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), mode: InlineOnly, want: MaterialNotReadable, encoding: EncodingPEM},

		// BundlePasswordMissing
		{name: "protected bundle, no password", src: ref(protected), want: BundlePasswordMissing, encoding: EncodingPKCS12},
		{name: "OpenSSL bundle, no password", src: ref(readTestdata(t, "openssl-aes256.p12")), want: BundlePasswordMissing, encoding: EncodingPKCS12},
		{name: "encrypted bundle without MAC, no password", src: ref(noMACEncrypted), want: BundlePasswordMissing, encoding: EncodingPKCS12},

		// BundlePasswordIncorrect
		{name: "wrong password", src: ref(protected), password: pwRef("wrong-" + sentinel), want: BundlePasswordIncorrect, encoding: EncodingPKCS12},
		{name: "OpenSSL legacy bundle, wrong password", src: ref(readTestdata(t, "openssl-legacy-rc2-40.p12")), password: pwRef(fixturePW + "x"), want: BundlePasswordIncorrect, encoding: EncodingPKCS12},
		{name: "encrypted bundle without MAC, wrong password", src: ref(noMACEncrypted), password: pwRef("wrong-" + sentinel), want: BundlePasswordIncorrect, encoding: EncodingPKCS12},
		{name: "empty-password bundle, a password configured", src: ref(readTestdata(t, "openssl-empty-password.p12")), password: pwRef(bundlePassword), want: BundlePasswordIncorrect, encoding: EncodingPKCS12},
		{name: "password that is not UTF-8", src: ref(protected), password: pwRef("\xff\xfe"), want: BundlePasswordIncorrect, encoding: EncodingPKCS12},

		// BundleCarriesNoCertificate
		{
			name:     "protected bundle without certificates",
			src:      ref(mustP12(pkcs12.Modern.EncodeTrustStore(nil, bundlePassword))),
			password: pwRef(bundlePassword), want: BundleCarriesNoCertificate, encoding: EncodingPKCS12,
		},
		{
			name: "passwordless bundle without certificates",
			src:  ref(mustP12(pkcs12.Passwordless.EncodeTrustStore(nil, ""))),
			want: BundleCarriesNoCertificate, encoding: EncodingPKCS12,
		},

		// TrustAnchorCarriesPrivateKey
		{name: "PEM certificate with PKCS#8 key", src: ref(slicesConcat(ca.Server.CertPEM, ca.Server.KeyPEM)), want: TrustAnchorCarriesPrivateKey, encoding: EncodingPEM},
		{name: "PEM key before certificate", src: ref(slicesConcat(pemBlock("EC PRIVATE KEY", sec1), ca.CA.CertPEM)), want: TrustAnchorCarriesPrivateKey, encoding: EncodingPEM},
		{name: "PEM encrypted key block", src: ref(slicesConcat(ca.CA.CertPEM, pemBlock("ENCRYPTED PRIVATE KEY", []byte(sentinel)))), want: TrustAnchorCarriesPrivateKey, encoding: EncodingPEM},
		{name: "inline PEM with key", src: inline(string(slicesConcat(ca.CA.CertPEM, ca.Server.KeyPEM))), mode: ReferenceOrInline, want: TrustAnchorCarriesPrivateKey, encoding: EncodingPEM},
		{name: "DER PKCS#8 key", src: func(fx *fixture) Source { return FromReference(fx.file("anchor", keyDER(fx.t, ca.Server))) }, want: TrustAnchorCarriesPrivateKey, encoding: EncodingDER},
		{name: "DER SEC 1 key", src: ref(sec1), want: TrustAnchorCarriesPrivateKey, encoding: EncodingDER},
		{name: "PKCS#12 with key", src: ref(withKey), password: pwRef(bundlePassword), want: TrustAnchorCarriesPrivateKey, encoding: EncodingPKCS12},
		{name: "PKCS#12 with key, no password", src: ref(withKey), want: TrustAnchorCarriesPrivateKey, encoding: EncodingPKCS12},
		{name: "OpenSSL PKCS#12 with key", src: ref(readTestdata(t, "openssl-withkey.p12")), password: pwRef(fixturePW), want: TrustAnchorCarriesPrivateKey, encoding: EncodingPKCS12},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			var pw *secret.Reference
			if tt.password != nil {
				pw = tt.password(fx)
			}
			a, err := fx.load(tt.src(fx), pw, tt.mode)
			require.Nil(t, a)
			le := requireLoadFailure(t, err, tt.want, bundlePassword, fixturePW)
			require.Equal(t, tt.encoding, le.Encoding, "%v", err)
			require.Equal(t, tt.isPW, le.Password, "%v", err)
			require.NotContains(t, err.Error(), fx.dir)
			require.NotContains(t, err.Error(), "-----")
			for _, b := range fx.r.handedOut() {
				require.Equal(t, make([]byte, len(b)), b, "a resolved buffer was not wiped")
			}
		})
	}
}

func TestLoadWipesResolvedBuffers(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	for name, tc := range map[string]struct {
		material []byte
		password string
	}{
		"PEM":     {material: ca.CA.CertPEM},
		"DER":     {material: ca.CA.DER()},
		"PKCS#12": {material: mustP12(ca.CA.PKCS12(bundlePassword)), password: bundlePassword},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			var pw *secret.Reference
			if tc.password != "" {
				pw = fx.password(tc.password)
			}
			a, err := fx.load(FromReference(fx.file("anchor", tc.material)), pw, ReferenceOnly)
			require.NoError(t, err)
			handed := fx.r.handedOut()
			if tc.password != "" {
				require.Len(t, handed, 2)
			} else {
				require.Len(t, handed, 1)
			}
			for _, b := range handed {
				require.NotEmpty(t, b)
				require.Equal(t, make([]byte, len(b)), b)
			}
			// The certificates do not alias the wiped buffer.
			require.True(t, a.Certificates()[0].Equal(ca.CA.Cert))
			require.NotEmpty(t, a.Subject())
		})
	}
}

func TestLoadReadsTheReferenceEveryTime(t *testing.T) {
	t.Parallel()
	first, second := testca.New(), testca.New()
	fx := newFixture(t)
	ref := fx.file("anchor", first.CA.CertPEM)
	a, err := fx.load(FromReference(ref), nil, ReferenceOnly)
	require.NoError(t, err)
	require.True(t, a.Certificates()[0].Equal(first.CA.Cert))
	fx.file("anchor", second.CA.DER()) // rotated, and in another encoding
	a, err = fx.load(FromReference(ref), nil, ReferenceOnly)
	require.NoError(t, err)
	require.True(t, a.Certificates()[0].Equal(second.CA.Cert))
	require.Equal(t, EncodingDER, a.Encoding())
}

func TestInterpretationModes(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	pemText := string(ca.CA.CertPEM)
	tests := []struct {
		name  string
		value func(fx *fixture) string
		mode  InterpretationMode
		want  Failure // "" means it loads
	}{
		{name: "reference, ReferenceOnly", value: refValue(ca), mode: ReferenceOnly},
		{name: "reference, ReferenceOrInline", value: refValue(ca), mode: ReferenceOrInline},
		{name: "reference, InlineOnly", value: refValue(ca), mode: InlineOnly, want: EncodingNotRecognized},
		{name: "inline PEM, ReferenceOnly", value: constant(pemText), mode: ReferenceOnly, want: ReferenceMalformed},
		{name: "inline PEM, ReferenceOrInline", value: constant(pemText), mode: ReferenceOrInline},
		{name: "inline PEM, InlineOnly", value: constant(pemText), mode: InlineOnly},
		{name: "inline PEM with escaped-JSON-style padding, InlineOnly", value: constant("\n  " + pemText + "  \n"), mode: InlineOnly},
		{name: "malformed reference, ReferenceOnly", value: constant("file:"), mode: ReferenceOnly, want: ReferenceMalformed},
		{name: "malformed reference, ReferenceOrInline", value: constant("vault:" + sentinel), mode: ReferenceOrInline, want: EncodingNotRecognized},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			value := tt.value(fx)

			// The two ways in: ParseSource then Load, as configuration
			// binding does, and Load on a raw inline Source, which must
			// enforce the mode itself.
			src, perr := ParseSource(value, tt.mode)
			a, err := fx.load(src, nil, tt.mode)
			if perr != nil {
				err = perr
			}
			b, err2 := fx.load(FromValue(value), nil, tt.mode)
			if tt.want == "" {
				require.NoError(t, err)
				require.NoError(t, err2)
				require.True(t, a.Certificates()[0].Equal(ca.CA.Cert))
				require.True(t, b.Certificates()[0].Equal(ca.CA.Cert))
				return
			}
			requireLoadFailure(t, err, tt.want)
			requireLoadFailure(t, err2, tt.want)
		})
	}
}

func refValue(ca *testca.Bundle) func(fx *fixture) string {
	return func(fx *fixture) string {
		r := fx.file("anchor", ca.CA.CertPEM)
		return r.Scheme + ":" + r.Target
	}
}

func constant(s string) func(*fixture) string { return func(*fixture) string { return s } }

func TestReferenceOnlyRefusalNamesTheInlineModes(t *testing.T) {
	t.Parallel()
	_, err := ParseSource(string(testca.New().CA.CertPEM), ReferenceOnly)
	le := requireLoadFailure(t, err, ReferenceMalformed)
	require.Contains(t, le.Reason, "ReferenceOrInline")
	require.NotContains(t, err.Error(), "MII")
}

func TestParseSource(t *testing.T) {
	t.Parallel()
	src, err := ParseSource("", ReferenceOnly)
	require.NoError(t, err)
	require.True(t, src.IsZero())
	src, err = ParseSource("  ", InlineOnly)
	require.NoError(t, err)
	require.True(t, src.IsZero())

	src, err = ParseSource("docker-secret:ca", ReferenceOnly)
	require.NoError(t, err)
	ref, ok := src.Reference()
	require.True(t, ok)
	require.Equal(t, secret.Reference{Scheme: secret.SchemeDockerSecret, Target: "ca"}, ref)
	require.False(t, src.IsInline())

	src, err = ParseSource("docker-secret:ca", InlineOnly)
	require.NoError(t, err)
	require.True(t, src.IsInline())

	_, err = ParseSource("x", InterpretationMode(7))
	require.Error(t, err)
	_, err = Load(t.Context(), &recordingResolver{}, FromValue("x"), nil, InterpretationMode(7))
	require.Error(t, err)
}

func TestParseInterpretationMode(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]InterpretationMode{
		"": ReferenceOnly, "ReferenceOnly": ReferenceOnly, "referenceorinline": ReferenceOrInline, " InlineOnly ": InlineOnly,
	} {
		got, err := ParseInterpretationMode(in)
		require.NoError(t, err, in)
		require.Equal(t, want, got, in)
	}
	_, err := ParseInterpretationMode("Inline")
	require.Error(t, err)
	require.Equal(t, ReferenceOnly, InterpretationMode(0), "the zero value is the default")
	require.Equal(t, "InlineOnly", InlineOnly.String())
}

func TestSourceNeverPrintsItsValue(t *testing.T) {
	t.Parallel()
	for _, src := range []Source{
		FromReference(secret.Reference{Scheme: secret.SchemeFile, Target: "/run/" + sentinel}),
		FromValue("-----BEGIN CERTIFICATE-----\n" + sentinel + "\n-----END CERTIFICATE-----\n"),
	} {
		for _, s := range []string{fmt.Sprint(src), fmt.Sprintf("%v %+v %#v %s", src, src, src, src), src.LogValue().String()} {
			require.NotContains(t, s, sentinel)
		}
		var b strings.Builder
		slog.New(slog.NewJSONHandler(&b, nil)).Info("x", "src", src)
		require.NotContains(t, b.String(), sentinel)
	}
	require.Equal(t, "(none)", Source{}.String())
	require.Equal(t, "inline", FromValue("x").String())
}

func TestAnchorLogValue(t *testing.T) {
	t.Parallel()
	ca, other := testca.New(), testca.New()
	fx := newFixture(t)
	a, err := fx.load(FromReference(fx.file("anchor", slicesConcat(ca.CA.CertPEM, other.CA.CertPEM))), nil, ReferenceOnly)
	require.NoError(t, err)
	var b bytes.Buffer
	slog.New(slog.NewJSONHandler(&b, nil)).Info("loaded trust anchor", "anchor", a)
	var line struct {
		Msg    string `json:"msg"`
		Anchor struct {
			Subject      string   `json:"subject"`
			Fingerprint  string   `json:"fingerprint"`
			Encoding     string   `json:"encoding"`
			Certificates int      `json:"certificates"`
			Fingerprints []string `json:"fingerprints"`
		} `json:"anchor"`
	}
	require.NoError(t, json.Unmarshal(b.Bytes(), &line), b.String())
	require.Equal(t, "loaded trust anchor", line.Msg)
	require.Equal(t, ca.CA.Cert.Subject.String(), line.Anchor.Subject)
	require.Contains(t, line.Anchor.Subject, "CN=MailFathom test root CA")
	sum := sha256.Sum256(ca.CA.Cert.Raw)
	require.Equal(t, hex.EncodeToString(sum[:]), line.Anchor.Fingerprint)
	require.Len(t, line.Anchor.Fingerprint, 64)
	require.Equal(t, "PEM", line.Anchor.Encoding)
	require.Equal(t, 2, line.Anchor.Certificates)
	require.Equal(t, a.Fingerprints(), line.Anchor.Fingerprints)
}

func TestSniff(t *testing.T) {
	t.Parallel()
	ca := testca.New()
	p12 := mustP12(ca.CA.PKCS12(""))
	for name, tc := range map[string]struct {
		in   []byte
		want kind
	}{
		"certificate":        {ca.CA.DER(), kindCertificate},
		"truncated":          {ca.CA.DER()[:10], kindCertificate},
		"PKCS#12":            {p12, kindPKCS12},
		"PKCS#8 key":         {keyDER(t, ca.Server), kindPrivateKey},
		"PEM text":           {ca.CA.CertPEM, kindUnknown},
		"text starting with": {[]byte("0123456789"), kindUnknown},
		"empty":              {nil, kindUnknown},
		"one byte":           {[]byte{0x30}, kindUnknown},
		"long length form":   {[]byte{0x30, 0x85, 1, 2, 3, 4, 5}, kindUnknown},
	} {
		require.Equal(t, tc.want, sniff(tc.in), name)
	}
}

// TestLoadSurvivesTheResolversNewlineTrim loads binary material whose last
// byte is 0x0A through the real resolver, which removes it.
func TestLoadSurvivesTheResolversNewlineTrim(t *testing.T) {
	t.Parallel()
	// Material ending in exactly one newline: the resolver trims a CR
	// before it too, and more than one line ending, which is another case.
	oneNewline := func(b []byte) bool {
		n := len(b)
		return n >= 2 && b[n-1] == '\n' && b[n-2] != '\n' && b[n-2] != '\r'
	}
	var der []byte
	var ca *testca.Bundle
	for !oneNewline(der) {
		ca = testca.New()
		der = ca.CA.DER()
	}
	var p12 []byte
	fast := pkcs12.LegacyDES.WithIterations(1)
	for !oneNewline(p12) {
		p12 = mustP12(fast.EncodeTrustStore([]*x509.Certificate{ca.CA.Cert}, bundlePassword))
	}
	for name, tc := range map[string]struct {
		material []byte
		password string
	}{
		"DER":     {material: der},
		"PKCS#12": {material: p12, password: bundlePassword},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			fx := newFixture(t)
			var pw *secret.Reference
			if tc.password != "" {
				pw = fx.password(tc.password)
			}
			a, err := fx.load(FromReference(fx.file("anchor", tc.material)), pw, ReferenceOnly)
			require.NoError(t, err)
			require.True(t, a.Certificates()[0].Equal(ca.CA.Cert))
			require.Len(t, fx.r.handedOut()[0], len(tc.material)-1, "the resolver still trims; this repair can go once it does not")
		})
	}
}

func TestRestoreTrimmedNewline(t *testing.T) {
	t.Parallel()
	for _, suffix := range []string{"\n", "\r\n"} {
		full := []byte("\x30\x06\x04\x04ab" + suffix)
		if suffix == "\n" {
			full = []byte("\x30\x05\x04\x03ab" + suffix)
		}
		require.Equal(t, full, restoreTrimmedNewline(full[:len(full)-len(suffix)]), "%q", suffix)
		require.Nil(t, restoreTrimmedNewline(full), "%q: nothing missing", suffix)
	}
	require.Nil(t, restoreTrimmedNewline([]byte("\x30\x09\x04\x07ab")), "three bytes missing is truncation")
	require.Nil(t, restoreTrimmedNewline([]byte("\x30\x80\x04\x01a")), "indefinite length")
}
