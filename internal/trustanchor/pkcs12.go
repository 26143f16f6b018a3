// Copyright 2015, 2018, 2019 Opsmate, Inc. All rights reserved.
// Copyright 2015 The Go Authors. All rights reserved.
// Use of the code copied here is governed by a BSD-style
// license that can be found in the NOTICE file.

// The PKCS#12 ASN.1 structures of this file (pfxPDU to pbmac1Params) and
// its object identifiers are those of software.sslmate.com/src/go-pkcs12
// (v0.7.4, itself from golang.org/x/crypto/pkcs12), copied under that
// module's BSD-3-Clause licence, which NOTICE reproduces; their fields were
// renamed and a safe bag's attributes are left unparsed. The reader that
// uses them is MailFathom's own.

package trustanchor

import (
	"bytes"
	"crypto/aes"
	"crypto/cipher"
	"crypto/des"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/binary"
	"errors"
	"hash"
	"unicode/utf16"
	"unicode/utf8"
)

// This file reads PKCS#12 (RFC 7292) bundles for their certificates.
//
// software.sslmate.com/src/go-pkcs12 (which the tests use to write bundles)
// cannot be used to read them: DecodeTrustStore accepts only certificates
// carrying Java's trusted-certificate attribute, and DecodeChain only a
// bundle holding a private key, so neither opens the most common anchor
// bundle there is, `openssl pkcs12 -export -nokeys`. The reader here takes
// the bundle apart itself and never decrypts a key bag: a key is refused by
// the bag's type alone, so no private key is ever materialized.
//
// Supported: password integrity (HMAC with the PKCS#12 KDF over SHA-1,
// SHA-224, SHA-256, SHA-384 or SHA-512, and PBMAC1), unencrypted content,
// and content encrypted with PBES2 (PBKDF2 with HMAC-SHA-1/224/256/384/512,
// AES-128/192/256-CBC or DES-EDE3-CBC) or the PKCS#12 PBEs (SHA-1 with
// 3-key and 2-key triple DES, 128-bit and 40-bit RC2). Not supported:
// public-key integrity and privacy modes, RC4, and BER indefinite lengths.

var (
	oidData          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 1}
	oidEncryptedData = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 7, 6}

	oidKeyBag          = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 1}
	oidShroudedKeyBag  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 2}
	oidCertBag         = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 3}
	oidSafeContentsBag = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 10, 1, 6}
	oidX509Certificate = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 9, 22, 1}

	oidSHA1   = asn1.ObjectIdentifier{1, 3, 14, 3, 2, 26}
	oidSHA224 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 4}
	oidSHA256 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 1}
	oidSHA384 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 2}
	oidSHA512 = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 2, 3}

	oidHMACWithSHA1   = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 7}
	oidHMACWithSHA224 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 8}
	oidHMACWithSHA256 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 9}
	oidHMACWithSHA384 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 10}
	oidHMACWithSHA512 = asn1.ObjectIdentifier{1, 2, 840, 113549, 2, 11}

	oidPBMAC1 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 14}
	oidPBES2  = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 13}
	oidPBKDF2 = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 5, 12}

	oidPBEWithSHA3KeyTripleDES = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 3}
	oidPBEWithSHA2KeyTripleDES = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 4}
	oidPBEWithSHA128BitRC2     = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 5}
	oidPBEWithSHA40BitRC2      = asn1.ObjectIdentifier{1, 2, 840, 113549, 1, 12, 1, 6}

	oidAES128CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 2}
	oidAES192CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 22}
	oidAES256CBC  = asn1.ObjectIdentifier{2, 16, 840, 1, 101, 3, 4, 1, 42}
	oidDESEDE3CBC = asn1.ObjectIdentifier{1, 2, 840, 113549, 3, 7}
)

// maxIterations bounds every key derivation's iteration count. Real
// bundles use 1 to a few hundred thousand; the bound keeps a corrupt count
// from stalling startup for hours.
const maxIterations = 10_000_000

// maxNesting bounds how deep SafeContents bags may nest.
const maxNesting = 4

type pfxPDU struct {
	Version  int
	AuthSafe contentInfo
	MacData  macData `asn1:"optional"`
}

type contentInfo struct {
	ContentType asn1.ObjectIdentifier
	Content     asn1.RawValue `asn1:"tag:0,explicit,optional"`
}

type macData struct {
	Mac        digestInfo
	MacSalt    []byte
	Iterations int `asn1:"optional,default:1"`
}

type digestInfo struct {
	Algorithm pkix.AlgorithmIdentifier
	Digest    []byte
}

type encryptedData struct {
	Version              int
	EncryptedContentInfo encryptedContentInfo
}

type encryptedContentInfo struct {
	ContentType                asn1.ObjectIdentifier
	ContentEncryptionAlgorithm pkix.AlgorithmIdentifier
	EncryptedContent           []byte `asn1:"tag:0,optional"`
}

type safeBag struct {
	ID         asn1.ObjectIdentifier
	Value      asn1.RawValue `asn1:"tag:0,explicit"`
	Attributes asn1.RawValue `asn1:"optional"`
}

type certBag struct {
	ID   asn1.ObjectIdentifier
	Data []byte `asn1:"tag:0,explicit"`
}

type pbeParams struct {
	Salt       []byte
	Iterations int
}

type pbes2Params struct {
	KDF    pkix.AlgorithmIdentifier
	Scheme pkix.AlgorithmIdentifier
}

type pbkdf2Params struct {
	Salt       asn1.RawValue
	Iterations int
	KeyLength  int                      `asn1:"optional"`
	PRF        pkix.AlgorithmIdentifier `asn1:"optional"`
}

type pbmac1Params struct {
	KDF pkix.AlgorithmIdentifier
	MAC pkix.AlgorithmIdentifier
}

// errUnsupported reports an algorithm this reader does not implement; its
// text is fixed and names the algorithm's public identifier only.
type errUnsupported struct{ what string }

func (e errUnsupported) Error() string { return e.what + " is not supported" }

// errWrongKey reports content that did not decrypt: a wrong password, or
// corruption, which PKCS#12 cannot tell apart.
var errWrongKey = errors.New("the content does not decrypt")

// password holds a bundle password in the two forms PKCS#12 uses: the
// NUL-terminated big-endian UTF-16 ("BMPString") the PKCS#12 KDF takes, and
// the UTF-8 PBES2 and PBMAC1 take.
type password struct {
	bmp  []byte
	utf8 []byte
}

func (p password) wipe() { clear(p.bmp) }

// passwordCandidates returns the passwords to try. A configured password is
// the only candidate. Without one the bundle may be unprotected or use the
// empty password, which tools encode either as a lone terminator or as
// nothing at all.
func passwordCandidates(pw []byte, configured bool) ([]password, bool) {
	if !configured {
		return []password{{bmp: []byte{0, 0}}, {bmp: []byte{}}}, true
	}
	if !utf8.Valid(pw) {
		return nil, false
	}
	bmp := make([]byte, 0, 2*len(pw)+2)
	for s := pw; len(s) > 0; {
		r, n := utf8.DecodeRune(s)
		s = s[n:]
		if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			bmp = append(bmp, byte(r1>>8), byte(r1), byte(r2>>8), byte(r2))
		} else {
			bmp = append(bmp, byte(r>>8), byte(r))
		}
	}
	bmp = append(bmp, 0, 0)
	return []password{{bmp: bmp, utf8: pw}}, true
}

// readPKCS12 returns the certificates in der, which sniff classified as a
// PFX. pw is the resolved password (nil when configured is false); the
// reader copies nothing of it that it does not wipe.
func readPKCS12(der, pw []byte, configured bool) ([]*x509.Certificate, *LoadError) {
	passwordFailure := func() *LoadError {
		if configured {
			return loadFailure(BundlePasswordIncorrect, EncodingPKCS12, "the bundle did not open with the configured password")
		}
		return loadFailure(BundlePasswordMissing, EncodingPKCS12, "the bundle is password protected and no bundle password is configured")
	}
	carriesKey := loadFailure(TrustAnchorCarriesPrivateKey, EncodingPKCS12, "the bundle holds a private key; a trust anchor is a public certificate only")

	var pfx pfxPDU
	if err := unmarshalAll(der, &pfx); err != nil {
		if len(der) > 1 && der[1] == 0x80 {
			return nil, notReadable(EncodingPKCS12, "the bundle uses BER indefinite-length encoding, which is not supported; re-export it, for example with openssl pkcs12")
		}
		return nil, notReadable(EncodingPKCS12, "the bundle does not parse")
	}
	if pfx.Version != 3 {
		return nil, notReadable(EncodingPKCS12, "the bundle is not a version 3 PFX")
	}
	if !pfx.AuthSafe.ContentType.Equal(oidData) {
		return nil, notReadable(EncodingPKCS12, "the bundle uses public-key integrity protection, which is not supported; export it with password integrity")
	}
	var authSafe []byte
	if err := unmarshalAll(pfx.AuthSafe.Content.Bytes, &authSafe); err != nil {
		return nil, notReadable(EncodingPKCS12, "the bundle does not parse")
	}
	var items []contentInfo
	if err := unmarshalAll(authSafe, &items); err != nil {
		return nil, notReadable(EncodingPKCS12, "the bundle does not parse")
	}

	// Unencrypted content is readable without the password. A key there is
	// reported at once, whatever the password situation: the bundle is the
	// wrong kind of file either way.
	var (
		plain     [][]byte
		encrypted []encryptedContentInfo
	)
	for _, it := range items {
		switch {
		case it.ContentType.Equal(oidData):
			var data []byte
			if err := unmarshalAll(it.Content.Bytes, &data); err != nil {
				return nil, notReadable(EncodingPKCS12, "the bundle does not parse")
			}
			plain = append(plain, data)
		case it.ContentType.Equal(oidEncryptedData):
			var ed encryptedData
			if err := unmarshalAll(it.Content.Bytes, &ed); err != nil || ed.Version != 0 {
				return nil, notReadable(EncodingPKCS12, "the bundle's encrypted content does not parse")
			}
			encrypted = append(encrypted, ed.EncryptedContentInfo)
		default:
			return nil, notReadable(EncodingPKCS12, "the bundle uses public-key privacy (enveloped content), which is not supported")
		}
	}
	var w bagWalker
	for _, data := range plain {
		if err := w.walk(data, 0); err != nil {
			return nil, notReadable(EncodingPKCS12, "the bundle's contents do not parse")
		}
	}
	if w.key {
		return nil, carriesKey
	}

	// Integrity, which is also how a password is checked.
	candidates, ok := passwordCandidates(pw, configured)
	if !ok {
		return nil, passwordFailure()
	}
	defer func(all []password) {
		for _, c := range all {
			c.wipe()
		}
	}(candidates)
	macVerified := len(pfx.MacData.Mac.Algorithm.Algorithm) > 0
	if macVerified {
		var match []password
		for _, c := range candidates {
			ok, err := verifyMAC(&pfx.MacData, authSafe, c)
			if err != nil {
				return nil, notReadable(EncodingPKCS12, "the bundle's integrity check uses "+err.Error())
			}
			if ok {
				match = []password{c}
				break
			}
		}
		if match == nil {
			return nil, passwordFailure()
		}
		// The password that verified the MAC is the one to decrypt with.
		candidates = match
	}

	// Encrypted content. Without a MAC, content that does not decrypt to
	// SafeContents is the only sign of a wrong or missing password.
	for _, eci := range encrypted {
		var (
			opened bool
			last   error
		)
		for _, c := range candidates {
			data, err := decrypt(eci, c)
			if err == nil && unmarshalAll(data, &[]safeBag{}) != nil {
				err = errWrongKey
			}
			if err == nil {
				werr := w.walk(data, 0)
				clear(data)
				if werr != nil {
					return nil, notReadable(EncodingPKCS12, "the bundle's contents do not parse")
				}
				opened = true
				break
			}
			clear(data)
			var unsupported errUnsupported
			if errors.As(err, &unsupported) {
				return nil, notReadable(EncodingPKCS12, "the bundle's encryption uses "+unsupported.Error())
			}
			last = err
		}
		if !opened {
			if macVerified || !errors.Is(last, errWrongKey) {
				return nil, notReadable(EncodingPKCS12, "the bundle's encrypted contents do not decrypt")
			}
			return nil, passwordFailure()
		}
	}

	switch {
	case w.key:
		return nil, carriesKey
	case w.unparsed:
		return nil, notReadable(EncodingPKCS12, "a certificate in the bundle does not parse")
	case len(w.certs) == 0:
		return nil, loadFailure(BundleCarriesNoCertificate, EncodingPKCS12, "the bundle opened but holds no certificate")
	}
	return w.certs, nil
}

// bagWalker collects certificates and notices keys across SafeContents.
type bagWalker struct {
	certs    []*x509.Certificate
	key      bool
	unparsed bool
}

// walk reads one SafeContents. Key bags are recognized by type and never
// decrypted or parsed. Certificates are parsed from a copy, since
// crypto/x509 keeps references into its input and the input is wiped.
func (w *bagWalker) walk(data []byte, depth int) error {
	var bags []safeBag
	if err := unmarshalAll(data, &bags); err != nil {
		return err
	}
	for _, bag := range bags {
		switch {
		case bag.ID.Equal(oidKeyBag), bag.ID.Equal(oidShroudedKeyBag):
			w.key = true
		case bag.ID.Equal(oidCertBag):
			var cb certBag
			if err := unmarshalAll(bag.Value.Bytes, &cb); err != nil {
				return err
			}
			if !cb.ID.Equal(oidX509Certificate) {
				continue // an SDSI certificate, which is no X.509 anchor
			}
			c, err := x509.ParseCertificate(bytes.Clone(cb.Data))
			if err != nil {
				w.unparsed = true
				continue
			}
			w.certs = append(w.certs, c)
		case bag.ID.Equal(oidSafeContentsBag):
			if depth >= maxNesting {
				return errors.New("nested too deeply")
			}
			if err := w.walk(bag.Value.Bytes, depth+1); err != nil {
				return err
			}
		}
		// CRL and secret bags are ignored.
	}
	return nil
}

// verifyMAC reports whether the MAC over message verifies with p.
func verifyMAC(md *macData, message []byte, p password) (bool, error) {
	alg := md.Mac.Algorithm
	var key []byte
	var newHash func() hash.Hash
	if alg.Algorithm.Equal(oidPBMAC1) {
		var params pbmac1Params
		if err := unmarshalAll(alg.Parameters.FullBytes, &params); err != nil {
			return false, errUnsupported{"malformed PBMAC1 parameters, which"}
		}
		newHash = hmacHash(params.MAC.Algorithm)
		if newHash == nil {
			return false, errUnsupported{"the PBMAC1 MAC " + params.MAC.Algorithm.String() + ", which"}
		}
		prf, salt, iterations, keyLen, err := pbkdf2Parameters(params.KDF)
		if err != nil {
			return false, err
		}
		// RFC 9579 requires an explicit key length and recommends refusing
		// one below 20 octets, which would weaken the MAC.
		if keyLen < 20 || keyLen > 64 {
			return false, errUnsupported{"a PBMAC1 key length outside 20 to 64 octets, which"}
		}
		key = pbkdf2Key(prf, p.utf8, salt, iterations, keyLen)
	} else {
		newHash = digestHash(alg.Algorithm)
		if newHash == nil {
			return false, errUnsupported{"the MAC digest " + alg.Algorithm.String() + ", which"}
		}
		if md.Iterations < 1 || md.Iterations > maxIterations {
			return false, errUnsupported{"an iteration count out of range, which"}
		}
		key = pkcs12KDF(newHash, md.MacSalt, p.bmp, md.Iterations, 3, newHash().Size())
	}
	defer clear(key)
	mac := hmac.New(newHash, key)
	mac.Write(message)
	return hmac.Equal(mac.Sum(nil), md.Mac.Digest), nil
}

// decrypt decrypts one EncryptedContentInfo with p. It returns
// errUnsupported for an algorithm it does not implement and errWrongKey
// when the padding is wrong.
func decrypt(eci encryptedContentInfo, p password) ([]byte, error) {
	block, iv, err := contentCipher(eci.ContentEncryptionAlgorithm, p)
	if err != nil {
		return nil, err
	}
	ct := eci.EncryptedContent
	bs := block.BlockSize()
	if len(ct) == 0 || len(ct)%bs != 0 || len(iv) != bs {
		return nil, errors.New("malformed ciphertext")
	}
	out := make([]byte, len(ct))
	cipher.NewCBCDecrypter(block, iv).CryptBlocks(out, ct)
	pad := int(out[len(out)-1])
	if pad == 0 || pad > bs {
		clear(out)
		return nil, errWrongKey
	}
	for _, b := range out[len(out)-pad:] {
		if int(b) != pad {
			clear(out)
			return nil, errWrongKey
		}
	}
	return out[:len(out)-pad], nil
}

// contentCipher derives the block cipher and IV an encryption algorithm
// identifier names.
func contentCipher(alg pkix.AlgorithmIdentifier, p password) (cipher.Block, []byte, error) {
	if alg.Algorithm.Equal(oidPBES2) {
		return pbes2Cipher(alg, p)
	}
	var (
		keyLen int
		create func(key []byte) (cipher.Block, error)
	)
	switch {
	case alg.Algorithm.Equal(oidPBEWithSHA3KeyTripleDES):
		keyLen, create = 24, des.NewTripleDESCipher
	case alg.Algorithm.Equal(oidPBEWithSHA2KeyTripleDES):
		keyLen = 16
		create = func(k []byte) (cipher.Block, error) {
			k3 := append(append(make([]byte, 0, 24), k...), k[:8]...)
			defer clear(k3)
			return des.NewTripleDESCipher(k3)
		}
	case alg.Algorithm.Equal(oidPBEWithSHA128BitRC2):
		keyLen, create = 16, newRC2
	case alg.Algorithm.Equal(oidPBEWithSHA40BitRC2):
		keyLen, create = 5, newRC2
	default:
		return nil, nil, errUnsupported{"the algorithm " + alg.Algorithm.String() + ", which"}
	}
	var params pbeParams
	if err := unmarshalAll(alg.Parameters.FullBytes, &params); err != nil {
		return nil, nil, errUnsupported{"malformed PBE parameters, which"}
	}
	if params.Iterations < 1 || params.Iterations > maxIterations {
		return nil, nil, errUnsupported{"an iteration count out of range, which"}
	}
	key := pkcs12KDF(sha1.New, params.Salt, p.bmp, params.Iterations, 1, keyLen)
	defer clear(key)
	iv := pkcs12KDF(sha1.New, params.Salt, p.bmp, params.Iterations, 2, 8)
	block, err := create(key)
	if err != nil {
		return nil, nil, err
	}
	return block, iv, nil
}

func pbes2Cipher(alg pkix.AlgorithmIdentifier, p password) (cipher.Block, []byte, error) {
	var params pbes2Params
	if err := unmarshalAll(alg.Parameters.FullBytes, &params); err != nil {
		return nil, nil, errUnsupported{"malformed PBES2 parameters, which"}
	}
	var (
		keyLen int
		create func(key []byte) (cipher.Block, error)
	)
	switch s := params.Scheme.Algorithm; {
	case s.Equal(oidAES128CBC):
		keyLen, create = 16, aes.NewCipher
	case s.Equal(oidAES192CBC):
		keyLen, create = 24, aes.NewCipher
	case s.Equal(oidAES256CBC):
		keyLen, create = 32, aes.NewCipher
	case s.Equal(oidDESEDE3CBC):
		keyLen, create = 24, des.NewTripleDESCipher
	default:
		return nil, nil, errUnsupported{"the PBES2 cipher " + s.String() + ", which"}
	}
	var iv []byte
	if err := unmarshalAll(params.Scheme.Parameters.FullBytes, &iv); err != nil {
		return nil, nil, errUnsupported{"malformed PBES2 cipher parameters, which"}
	}
	prf, salt, iterations, explicitLen, err := pbkdf2Parameters(params.KDF)
	if err != nil {
		return nil, nil, err
	}
	if explicitLen != 0 && explicitLen != keyLen {
		return nil, nil, errUnsupported{"a PBES2 key length that does not match its cipher, which"}
	}
	key := pbkdf2Key(prf, p.utf8, salt, iterations, keyLen)
	defer clear(key)
	block, err := create(key)
	if err != nil {
		return nil, nil, err
	}
	return block, iv, nil
}

func pbkdf2Parameters(kdf pkix.AlgorithmIdentifier) (prf func() hash.Hash, salt []byte, iterations, keyLen int, err error) {
	if !kdf.Algorithm.Equal(oidPBKDF2) {
		return nil, nil, 0, 0, errUnsupported{"the key derivation " + kdf.Algorithm.String() + ", which"}
	}
	var params pbkdf2Params
	if err := unmarshalAll(kdf.Parameters.FullBytes, &params); err != nil {
		return nil, nil, 0, 0, errUnsupported{"malformed PBKDF2 parameters, which"}
	}
	if params.Salt.Class != asn1.ClassUniversal || params.Salt.Tag != asn1.TagOctetString {
		return nil, nil, 0, 0, errUnsupported{"a PBKDF2 salt that is not an octet string, which"}
	}
	if params.Iterations < 1 || params.Iterations > maxIterations {
		return nil, nil, 0, 0, errUnsupported{"an iteration count out of range, which"}
	}
	prf = sha1.New // the default PRF, hmacWithSHA1
	if len(params.PRF.Algorithm) > 0 {
		if prf = hmacHash(params.PRF.Algorithm); prf == nil {
			return nil, nil, 0, 0, errUnsupported{"the PBKDF2 PRF " + params.PRF.Algorithm.String() + ", which"}
		}
	}
	return prf, params.Salt.Bytes, params.Iterations, params.KeyLength, nil
}

func digestHash(oid asn1.ObjectIdentifier) func() hash.Hash {
	switch {
	case oid.Equal(oidSHA1):
		return sha1.New
	case oid.Equal(oidSHA224):
		return sha256.New224
	case oid.Equal(oidSHA256):
		return sha256.New
	case oid.Equal(oidSHA384):
		return sha512.New384
	case oid.Equal(oidSHA512):
		return sha512.New
	}
	return nil
}

func hmacHash(oid asn1.ObjectIdentifier) func() hash.Hash {
	switch {
	case oid.Equal(oidHMACWithSHA1):
		return sha1.New
	case oid.Equal(oidHMACWithSHA224):
		return sha256.New224
	case oid.Equal(oidHMACWithSHA256):
		return sha256.New
	case oid.Equal(oidHMACWithSHA384):
		return sha512.New384
	case oid.Equal(oidHMACWithSHA512):
		return sha512.New
	}
	return nil
}

// pkcs12KDF is the key derivation of RFC 7292 appendix B.2: size bytes for
// purpose id (1 key, 2 IV, 3 MAC key) from salt and the BMPString password.
func pkcs12KDF(newHash func() hash.Hash, salt, password []byte, iterations int, id byte, size int) []byte {
	h := newHash()
	v := h.BlockSize()
	d := bytes.Repeat([]byte{id}, v)
	s := fillTo(salt, v)
	p := fillTo(password, v)
	i := append(s, p...)
	defer clear(i)
	defer clear(p)

	out := make([]byte, 0, size+h.Size())
	a := make([]byte, 0, h.Size())
	b := make([]byte, v)
	defer clear(a)
	defer clear(b)
	for len(out) < size {
		h.Reset()
		h.Write(d)
		h.Write(i)
		a = h.Sum(a[:0])
		for range iterations - 1 {
			h.Reset()
			h.Write(a)
			a = h.Sum(a[:0])
		}
		out = append(out, a...)
		if len(out) >= size {
			break
		}
		for k := range b {
			b[k] = a[k%len(a)]
		}
		// I_j = (I_j + B + 1) mod 2^v for every v-byte block I_j of I.
		for j := 0; j < len(i); j += v {
			carry := 1
			for k := v - 1; k >= 0; k-- {
				sum := int(i[j+k]) + int(b[k]) + carry
				i[j+k] = byte(sum)
				carry = sum >> 8
			}
		}
	}
	clear(out[size:])
	return out[:size]
}

// fillTo repeats x to the next multiple of v bytes (nothing for an empty
// x), as RFC 7292 B.2 steps 2 and 3 describe.
func fillTo(x []byte, v int) []byte {
	if len(x) == 0 {
		return nil
	}
	n := v * ((len(x) + v - 1) / v)
	out := make([]byte, n)
	for k := range out {
		out[k] = x[k%len(x)]
	}
	return out
}

// pbkdf2Key is PBKDF2 (RFC 8018 section 5.2) with HMAC over newHash. It is
// written out rather than taken from crypto/pbkdf2, which takes the
// password as a string that could not be wiped.
func pbkdf2Key(newHash func() hash.Hash, password, salt []byte, iterations, keyLen int) []byte {
	prf := hmac.New(newHash, password)
	hLen := prf.Size()
	out := make([]byte, 0, keyLen+hLen)
	u := make([]byte, 0, hLen)
	t := make([]byte, hLen)
	defer clear(u)
	defer clear(t)
	var counter [4]byte
	for block := uint32(1); len(out) < keyLen; block++ {
		prf.Reset()
		prf.Write(salt)
		binary.BigEndian.PutUint32(counter[:], block)
		prf.Write(counter[:])
		u = prf.Sum(u[:0])
		copy(t, u)
		for range iterations - 1 {
			prf.Reset()
			prf.Write(u)
			u = prf.Sum(u[:0])
			for k := range t {
				t[k] ^= u[k]
			}
		}
		out = append(out, t...)
	}
	clear(out[keyLen:])
	return out[:keyLen]
}

// unmarshalAll is asn1.Unmarshal refusing trailing data.
func unmarshalAll(in []byte, out any) error {
	rest, err := asn1.Unmarshal(in, out)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return errors.New("trailing data")
	}
	return nil
}
