package sasl

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	gosasl "github.com/emersion/go-sasl"
)

// NewXOAuth2Client returns an XOAUTH2 client, the bearer-token mechanism
// Google and Microsoft defined before OAUTHBEARER (RFC 7628) and still
// offer (https://developers.google.com/gmail/imap/xoauth2-protocol,
// https://learn.microsoft.com/exchange/client-developer/legacy-protocols/how-to-authenticate-an-imap-pop-smtp-application-by-using-oauth).
// The initial response is
//
//	user=<username>^Aauth=Bearer <token>^A^A
//
// with ^A the byte 0x01. A server refusing the token sends, instead of a
// tagged NO, a challenge holding a JSON object such as
// {"status":"401","schemes":"Bearer","scope":"https://mail.google.com/"};
// the client must answer it with an empty response, after which the server
// ends the command with NO. The client does so and records the refusal, and
// Finish (or Authenticate) reports it as a *BearerTokenError wrapping the
// server's NO. token is read, not kept past Start and never modified.
func NewXOAuth2Client(username string, token []byte) Client {
	return &xoauth2Client{username: username, token: token}
}

type xoauth2Client struct {
	username string
	token    []byte
	ir       []byte
	answered bool
	refusal  *BearerTokenError
}

// Start builds the initial response.
func (c *xoauth2Client) Start() (string, []byte, error) {
	if strings.ContainsRune(c.username, 0x01) || bytes.IndexByte(c.token, 0x01) >= 0 {
		return "", nil, fmt.Errorf("sasl: XOAUTH2: %w: the user name or token contains the byte 0x01", ErrWrongCredential)
	}
	ir := make([]byte, 0, len("user=\x01auth=Bearer \x01\x01")+len(c.username)+len(c.token))
	ir = append(ir, "user="...)
	ir = append(ir, c.username...)
	ir = append(ir, "\x01auth=Bearer "...)
	ir = append(ir, c.token...)
	ir = append(ir, "\x01\x01"...)
	c.ir = ir
	return "XOAUTH2", ir, nil
}

// Next answers the error challenge with an empty response and records the
// refusal; XOAUTH2 has no other challenge.
func (c *xoauth2Client) Next(challenge []byte) ([]byte, error) {
	if c.answered {
		return nil, fmt.Errorf("sasl: XOAUTH2: %w", gosasl.ErrUnexpectedServerChallenge)
	}
	c.answered = true
	clear(c.ir)
	var body struct {
		Status string `json:"status"`
	}
	_ = json.Unmarshal(challenge, &body) // a challenge that is not JSON is a refusal too
	c.refusal = &BearerTokenError{Mechanism: "XOAUTH2", Status: safeStatus(body.Status)}
	return []byte{}, nil
}

// Finish clears the initial response and settles the exchange: a recorded
// refusal is returned, wrapping serverErr, even if the server went on to
// report success.
func (c *xoauth2Client) Finish(serverErr error) error {
	clear(c.ir)
	if c.refusal != nil {
		c.refusal.Err = serverErr
		return c.refusal
	}
	return serverErr
}

// oauthBearerClient is go-sasl's OAUTHBEARER client (RFC 7628) with the
// error path RFC 7628 §3.2.3 requires: go-sasl's Next returns the decoded
// error challenge as an error, which makes imapclient's Authenticate return
// while the server still waits for the client's response. This wrapper
// instead answers with the single byte 0x01 the RFC prescribes, records the
// refusal and reports it from Finish, as XOAUTH2 does.
type oauthBearerClient struct {
	inner    Client
	answered bool
	refusal  *BearerTokenError
}

// Start returns go-sasl's initial response, the GS2 header "n,a=<user>,"
// followed by the key-value pairs (RFC 7628 §3.1).
func (c *oauthBearerClient) Start() (string, []byte, error) { return c.inner.Start() }

// Next answers the error challenge (RFC 7628 §3.2.2) with 0x01.
func (c *oauthBearerClient) Next(challenge []byte) ([]byte, error) {
	if c.answered {
		return nil, fmt.Errorf("sasl: OAUTHBEARER: %w", gosasl.ErrUnexpectedServerChallenge)
	}
	c.answered = true
	c.refusal = &BearerTokenError{Mechanism: "OAUTHBEARER"}
	var oerr *gosasl.OAuthBearerError
	if errors.As(ignoreResponse(c.inner.Next(challenge)), &oerr) {
		c.refusal.Status = safeStatus(oerr.Status)
	}
	return []byte{0x01}, nil
}

// Finish settles the exchange as xoauth2Client's Finish does.
func (c *oauthBearerClient) Finish(serverErr error) error {
	if c.refusal != nil {
		c.refusal.Err = serverErr
		return c.refusal
	}
	return serverErr
}

func ignoreResponse(_ []byte, err error) error { return err }
