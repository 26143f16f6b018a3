package sasl

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"strconv"
	"strings"

	gosasl "github.com/emersion/go-sasl"
)

// The SCRAM iteration-count bounds a server-first message must respect.
const (
	// MinIterations is the least iteration count accepted: RFC 5802 §9 and
	// RFC 7677 §4 say a count below 4096 should not be used, as it makes
	// the salted password (a password equivalent) cheap to brute-force for
	// whoever learns it.
	MinIterations = 4096
	// MaxIterations is the largest iteration count accepted. It bounds the
	// CPU a server can make the client spend on one attempt (about a second
	// of SHA-256 HMACs); deployments are at 4096 to a few hundred thousand.
	MaxIterations = 1_000_000
)

// NewScramSHA1Client returns a SCRAM-SHA-1 client (RFC 5802) for username
// and password. It sends no authorization identity and uses no channel
// binding: SCRAM-SHA-1-PLUS is not implemented and the GS2 header is "n,,".
// password is read, not kept past the server-first message and never
// modified; the caller clears it after the exchange.
//
// The user name and the password are prepared with SASLprep (RFC 4013) as
// query strings, as RFC 5802 §2.2 and §5.1 ask. Dovecot 2.3 does not
// prepare the password it derives its keys from, so against it a password
// that SASLprep changes (a soft hyphen, a fullwidth letter, a no-break
// space: anything NFKC or the mapping tables alter) fails with SCRAM while
// PLAIN accepts it; printable ASCII and already normalized text, emoji
// included, are unaffected.
//
// The exchange verifies the server's signature, so the outcome is only
// known once the server has answered: run the client with Authenticate, or
// call its Finish with the result of imapclient's Authenticate.
func NewScramSHA1Client(username string, password []byte) Client {
	return newScram("SCRAM-SHA-1", sha1.New, username, password, "")
}

// NewScramSHA256Client returns a SCRAM-SHA-256 client (RFC 7677, the
// SHA-256 instance of RFC 5802). Everything said of NewScramSHA1Client
// holds, with SCRAM-SHA-256-PLUS not implemented.
func NewScramSHA256Client(username string, password []byte) Client {
	return newScram("SCRAM-SHA-256", sha256.New, username, password, "")
}

// NewScramSHA512Client returns a SCRAM-SHA-512 client: RFC 5802 with
// SHA-512 as the hash (draft-melnikov-scram-sha-512), built exactly as
// SCRAM-SHA-256 is by RFC 7677. Everything said of NewScramSHA1Client
// holds, with SCRAM-SHA-512-PLUS not implemented. (Dovecot 2.3 does not
// offer SCRAM-SHA-512.)
func NewScramSHA512Client(username string, password []byte) Client {
	return newScram("SCRAM-SHA-512", sha512.New, username, password, "")
}

// scramClient runs one SCRAM exchange (RFC 5802 §3, §5, §7):
//
//	C: n,,n=<user>,r=<client nonce>                       (Start)
//	S: r=<client nonce><server nonce>,s=<salt>,i=<count>
//	C: c=biws,r=<nonce>,p=<ClientProof>                   (Next, step 1)
//	S: v=<ServerSignature>
//	C: (empty)                                            (Next, step 2)
//	S: OK
type scramClient struct {
	mech     string
	newHash  func() hash.Hash
	username string
	password []byte
	nonce    string // the client nonce; tests inject the RFC's

	step            int
	clientFirstBare string
	serverSignature []byte // expected in server-final
	verified        bool
	err             error // the first failure; every later call returns it
}

func newScram(mech string, h func() hash.Hash, username string, password []byte, nonce string) *scramClient {
	return &scramClient{mech: mech, newHash: h, username: username, password: password, nonce: nonce}
}

// Start sends the client-first message (RFC 5802 §7, client-first-message)
// as the initial response: the GS2 header "n,," (no channel binding, no
// authorization identity), then the SASLprep-ed and escaped user name and a
// fresh random nonce.
func (c *scramClient) Start() (string, []byte, error) {
	if c.step != 0 {
		return "", nil, c.fail(errors.New("sasl: " + c.mech + ": Start called twice"))
	}
	c.step = 1
	user, _, ok := saslprep([]byte(c.username))
	if !ok {
		return "", nil, c.fail(ErrUsernameNotPreparable)
	}
	if c.nonce == "" {
		// 128 bits from crypto/rand in base32: printable and without ",",
		// as RFC 5802 §7's "printable" requires.
		c.nonce = rand.Text()
	}
	c.clientFirstBare = "n=" + escapeSaslname(string(user)) + ",r=" + c.nonce
	return c.mech, []byte("n,," + c.clientFirstBare), nil
}

// Next answers the server-first message with the client-final message,
// then checks the server-final message's signature and answers it with an
// empty response.
func (c *scramClient) Next(challenge []byte) ([]byte, error) {
	if c.err != nil {
		return nil, c.err
	}
	switch c.step {
	case 1:
		c.step = 2
		resp, err := c.clientFinal(string(challenge))
		if err != nil {
			return nil, c.fail(err)
		}
		return resp, nil
	case 2:
		c.step = 3
		if err := c.checkServerFinal(string(challenge)); err != nil {
			return nil, c.fail(err)
		}
		return []byte{}, nil
	default:
		return nil, c.fail(fmt.Errorf("sasl: %s: %w", c.mech, gosasl.ErrUnexpectedServerChallenge))
	}
}

func (c *scramClient) fail(err error) error {
	if c.err == nil {
		c.err = err
	}
	clear(c.serverSignature)
	return c.err
}

func (c *scramClient) malformed(rule string) error {
	return fmt.Errorf("sasl: %s: %w: %s", c.mech, ErrMalformedChallenge, rule)
}

// clientFinal parses server-first-message (RFC 5802 §7):
//
//	server-first-message = [reserved-mext ","] nonce "," salt ","
//	                       iteration-count ["," extensions]
//
// and computes, per RFC 5802 §3:
//
//	SaltedPassword  := Hi(Normalize(password), salt, i)
//	ClientKey       := HMAC(SaltedPassword, "Client Key")
//	StoredKey       := H(ClientKey)
//	AuthMessage     := client-first-message-bare + "," +
//	                   server-first-message + "," +
//	                   client-final-message-without-proof
//	ClientSignature := HMAC(StoredKey, AuthMessage)
//	ClientProof     := ClientKey XOR ClientSignature
//	ServerKey       := HMAC(SaltedPassword, "Server Key")
//	ServerSignature := HMAC(ServerKey, AuthMessage)
func (c *scramClient) clientFinal(serverFirst string) ([]byte, error) {
	attrs := strings.Split(serverFirst, ",")
	if strings.HasPrefix(attrs[0], "m=") {
		// RFC 5802 §5.1: a client that does not understand a mandatory
		// extension must fail the authentication.
		return nil, c.malformed("server-first-message carries a mandatory extension")
	}
	if len(attrs) < 3 {
		return nil, c.malformed("server-first-message lacks nonce, salt or iteration count")
	}
	serverNonce, ok := strings.CutPrefix(attrs[0], "r=")
	if !ok {
		return nil, c.malformed("server-first-message does not start with the nonce")
	}
	// RFC 5802 §5.1: the nonce starts with the client's and the server
	// appends its own part.
	if !strings.HasPrefix(serverNonce, c.nonce) || len(serverNonce) == len(c.nonce) || !printable(serverNonce) {
		return nil, c.malformed("the server nonce does not extend the client nonce")
	}
	saltB64, ok := strings.CutPrefix(attrs[1], "s=")
	if !ok {
		return nil, c.malformed("server-first-message has no salt after the nonce")
	}
	salt, err := base64.StdEncoding.Strict().DecodeString(saltB64)
	if err != nil || len(salt) == 0 {
		return nil, c.malformed("the salt is not base64")
	}
	iterStr, ok := strings.CutPrefix(attrs[2], "i=")
	if !ok {
		return nil, c.malformed("server-first-message has no iteration count after the salt")
	}
	iter, err := parseCount(iterStr)
	if err != nil {
		return nil, c.malformed("the iteration count is not a positive number")
	}
	if iter < MinIterations || iter > MaxIterations {
		return nil, &IterationCountError{Count: iter, Min: MinIterations, Max: MaxIterations}
	}

	password, copied, ok := saslprep(c.password)
	if !ok {
		return nil, ErrPasswordNotPreparable
	}
	salted := hi(c.newHash, password, salt, iter)
	if copied {
		clear(password)
	}
	defer clear(salted)

	clientFinalWithoutProof := "c=biws,r=" + serverNonce // biws = base64("n,,")
	authMessage := []byte(c.clientFirstBare + "," + serverFirst + "," + clientFinalWithoutProof)

	clientKey := c.hmac(salted, []byte("Client Key"))
	defer clear(clientKey)
	h := c.newHash()
	h.Write(clientKey)
	storedKey := h.Sum(nil)
	defer clear(storedKey)
	proof := c.hmac(storedKey, authMessage)
	defer clear(proof)
	for i := range proof {
		proof[i] ^= clientKey[i]
	}
	serverKey := c.hmac(salted, []byte("Server Key"))
	defer clear(serverKey)
	c.serverSignature = c.hmac(serverKey, authMessage)

	resp := make([]byte, 0, len(clientFinalWithoutProof)+3+base64.StdEncoding.EncodedLen(len(proof)))
	resp = append(resp, clientFinalWithoutProof...)
	resp = append(resp, ",p="...)
	resp = base64.StdEncoding.AppendEncode(resp, proof)
	return resp, nil
}

// checkServerFinal checks server-final-message (RFC 5802 §7):
//
//	server-final-message = (server-error / verifier) ["," extensions]
//
// A verifier must equal the ServerSignature computed in clientFinal,
// compared in constant time.
func (c *scramClient) checkServerFinal(serverFinal string) error {
	first, _, _ := strings.Cut(serverFinal, ",")
	if v, ok := strings.CutPrefix(first, "e="); ok {
		if !scramServerErrors[v] {
			v = "other-error"
		}
		return &ScramServerError{Value: v}
	}
	v, ok := strings.CutPrefix(first, "v=")
	if !ok {
		return c.malformed("server-final-message has neither a verifier nor an error")
	}
	sig, err := base64.StdEncoding.Strict().DecodeString(v)
	if err != nil {
		return c.malformed("the server signature is not base64")
	}
	if !hmac.Equal(sig, c.serverSignature) {
		return ErrServerSignatureMismatch
	}
	c.verified = true
	clear(c.serverSignature)
	return nil
}

// Finish settles the exchange once the server has answered: serverErr is
// what imapclient's Authenticate returned. A server error is returned as
// is; a success is only one if the server's signature was verified, and
// ErrServerNotVerified otherwise.
func (c *scramClient) Finish(serverErr error) error {
	clear(c.serverSignature)
	if serverErr != nil {
		return serverErr
	}
	if c.err != nil {
		return c.err
	}
	if !c.verified {
		return ErrServerNotVerified
	}
	return nil
}

func (c *scramClient) hmac(key, msg []byte) []byte {
	m := hmac.New(c.newHash, key)
	m.Write(msg)
	return m.Sum(nil)
}

// hi is RFC 5802 §2.2's Hi(str, salt, i), which is PBKDF2 (RFC 2898) with
// HMAC as the PRF and the hash's output length as dkLen:
//
//	U1   := HMAC(str, salt + INT(1))
//	U2   := HMAC(str, U1)
//	...
//	Ui   := HMAC(str, Ui-1)
//	Hi   := U1 XOR U2 XOR ... XOR Ui
//
// It is written out rather than taken from crypto/pbkdf2, whose Key takes
// the password as a string this package could not clear.
func hi(h func() hash.Hash, str, salt []byte, i int) []byte {
	m := hmac.New(h, str)
	m.Write(salt)
	m.Write([]byte{0, 0, 0, 1})
	u := m.Sum(nil)
	out := bytes.Clone(u)
	for n := 1; n < i; n++ {
		m.Reset()
		m.Write(u)
		u = m.Sum(u[:0])
		for j := range out {
			out[j] ^= u[j]
		}
	}
	clear(u)
	return out
}

// escapeSaslname escapes a user name as RFC 5802 §5.1 requires: "=" as
// "=3D" and "," as "=2C".
func escapeSaslname(s string) string {
	return strings.NewReplacer("=", "=3D", ",", "=2C").Replace(s)
}

// printable is RFC 5802 §7's printable: %x21-2B / %x2D-7E, that is
// visible ASCII without ",".
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if b := s[i]; b < 0x21 || b > 0x7E || b == ',' {
			return false
		}
	}
	return true
}

// parseCount parses a positive decimal without sign or leading zeros, as
// RFC 5802 §7's posit-number.
func parseCount(s string) (int, error) {
	if s == "" || s[0] < '1' || s[0] > '9' || len(s) > 10 {
		return 0, strconv.ErrSyntax
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, strconv.ErrSyntax
		}
	}
	return strconv.Atoi(s)
}
