package trustanchor

import (
	"crypto/pbkdf2"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/asn1"
	"fmt"
	"hash"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
	"software.sslmate.com/src/go-pkcs12"

	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

func TestPBKDF2MatchesTheStandardLibrary(t *testing.T) {
	t.Parallel()
	for _, h := range []func() hash.Hash{sha1.New, sha256.New, sha512.New} {
		for _, keyLen := range []int{5, 16, 20, 32, 64, 100} {
			for _, iter := range []int{1, 2, 1000} {
				want, err := pbkdf2.Key(h, "pässword", []byte("salt"), iter, keyLen)
				require.NoError(t, err)
				require.Equal(t, want, pbkdf2Key(h, []byte("pässword"), []byte("salt"), iter, keyLen))
			}
		}
	}
	want, err := pbkdf2.Key(sha256.New, "", []byte("salt"), 3, 32)
	require.NoError(t, err)
	require.Equal(t, want, pbkdf2Key(sha256.New, nil, []byte("salt"), 3, 32))
}

// TestReadPKCS12EveryEncoder round-trips go-pkcs12's encoders, which cover
// every MAC and cipher family the reader implements except those only the
// OpenSSL fixtures use.
func TestReadPKCS12EveryEncoder(t *testing.T) {
	t.Parallel()
	ca, other := testca.New(), testca.New()
	certs := []*x509.Certificate{ca.CA.Cert, other.CA.Cert}
	encoders := map[string]*pkcs12.Encoder{
		"LegacyRC2": pkcs12.LegacyRC2, "LegacyDES": pkcs12.LegacyDES,
		"Modern2023": pkcs12.Modern2023, "Modern2026": pkcs12.Modern2026,
	}
	for name, enc := range encoders {
		for _, pw := range []string{"", "secret", "ünïcödé ✓"} {
			t.Run(fmt.Sprintf("%s/%q", name, pw), func(t *testing.T) {
				t.Parallel()
				der := mustP12(enc.EncodeTrustStore(certs, pw))
				got, lerr := readPKCS12(der, []byte(pw), pw != "")
				require.Nil(t, lerr)
				require.Len(t, got, 2)
				require.True(t, got[0].Equal(ca.CA.Cert))
				require.True(t, got[1].Equal(other.CA.Cert))

				_, lerr = readPKCS12(der, []byte(pw+"x"), true)
				require.NotNil(t, lerr)
				require.Equal(t, BundlePasswordIncorrect, lerr.Failure)
				if pw != "" {
					_, lerr = readPKCS12(der, nil, false)
					require.NotNil(t, lerr)
					require.Equal(t, BundlePasswordMissing, lerr.Failure)
				}

				withKey := mustP12(enc.Encode(ca.Server.Key, ca.Server.Cert, []*x509.Certificate{ca.CA.Cert}, pw))
				_, lerr = readPKCS12(withKey, []byte(pw), pw != "")
				require.NotNil(t, lerr)
				require.Equal(t, TrustAnchorCarriesPrivateKey, lerr.Failure)
			})
		}
	}
}

// TestReadPKCS12BoundsIterations gives a bundle a MAC iteration count past
// the bound; it must fail at once rather than derive for minutes.
func TestReadPKCS12BoundsIterations(t *testing.T) {
	t.Parallel()
	der := mustP12(pkcs12.Modern.EncodeTrustStore([]*x509.Certificate{testca.New().CA.Cert}, "pw"))
	var pfx pfxPDU
	require.NoError(t, unmarshalAll(der, &pfx))
	pfx.MacData.Iterations = 1 << 30
	mac, err := asn1.Marshal(pfx.MacData)
	require.NoError(t, err)
	_, h, l, ok := header(der)
	require.True(t, ok)
	body := der[h : h+l]
	var kept []byte
	for range 2 {
		_, eh, el, ok := header(body)
		require.True(t, ok)
		kept = append(kept, body[:eh+el]...)
		body = body[eh+el:]
	}
	tampered, err := asnSequence(append(kept, mac...))
	require.NoError(t, err)

	start := time.Now()
	_, lerr := readPKCS12(tampered, []byte("pw"), true)
	require.NotNil(t, lerr)
	require.Equal(t, MaterialNotReadable, lerr.Failure)
	require.Less(t, time.Since(start), 5*time.Second)
}

func TestPasswordCandidates(t *testing.T) {
	t.Parallel()
	c, ok := passwordCandidates([]byte("a€"), true)
	require.True(t, ok)
	require.Equal(t, []byte{0, 'a', 0x20, 0xac, 0, 0}, c[0].bmp)
	c, ok = passwordCandidates([]byte("😀"), true)
	require.True(t, ok)
	require.Equal(t, []byte{0xd8, 0x3d, 0xde, 0x00, 0, 0}, c[0].bmp, "a surrogate pair")
	_, ok = passwordCandidates([]byte{0xff}, true)
	require.False(t, ok)
	c, ok = passwordCandidates(nil, false)
	require.True(t, ok)
	require.Len(t, c, 2)
}
