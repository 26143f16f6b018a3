package sasl

import (
	"crypto/hmac"
	"crypto/md5"
	"encoding/hex"
	"fmt"

	gosasl "github.com/emersion/go-sasl"
)

// NewCramMD5Client returns a CRAM-MD5 client (RFC 2195). The server sends a
// challenge, conventionally a msg-id such as
// "<1896.697170952@postoffice.reston.mci.net>", and the client answers with
// the user name, a space and the lower-case hex HMAC-MD5 (RFC 2104) of the
// challenge keyed with the password:
//
//	digest = MD5((K XOR opad), MD5((K XOR ipad), challenge))
//
// The password never leaves the client, but the server must hold it in
// clear text and does not prove it knows it, and HMAC-MD5 over a captured
// exchange can be attacked offline: on the strength order CRAM-MD5 ranks
// below every SCRAM variant. password is read, not kept past the answer
// and never modified.
func NewCramMD5Client(username string, password []byte) Client {
	return &cramMD5Client{username: username, password: password}
}

type cramMD5Client struct {
	username string
	password []byte
	answered bool
	resp     []byte
}

// Start names the mechanism. CRAM-MD5 has no initial response (RFC 2195 §2:
// the server speaks first).
func (c *cramMD5Client) Start() (string, []byte, error) {
	return "CRAM-MD5", nil, nil
}

// Next answers the server's one challenge.
func (c *cramMD5Client) Next(challenge []byte) ([]byte, error) {
	if c.answered {
		return nil, fmt.Errorf("sasl: CRAM-MD5: %w", gosasl.ErrUnexpectedServerChallenge)
	}
	c.answered = true
	if len(challenge) == 0 {
		return nil, fmt.Errorf("sasl: CRAM-MD5: %w: the challenge is empty", ErrMalformedChallenge)
	}
	m := hmac.New(md5.New, c.password)
	m.Write(challenge)
	digest := m.Sum(nil)
	c.resp = make([]byte, 0, len(c.username)+1+hex.EncodedLen(len(digest)))
	c.resp = append(c.resp, c.username...)
	c.resp = append(c.resp, ' ')
	c.resp = hex.AppendEncode(c.resp, digest)
	return c.resp, nil
}

// Finish clears the response and returns serverErr: the server's answer is
// the whole outcome, as CRAM-MD5 does not authenticate the server.
func (c *cramMD5Client) Finish(serverErr error) error {
	clear(c.resp)
	return serverErr
}
