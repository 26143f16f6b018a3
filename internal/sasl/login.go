package sasl

import (
	"bytes"
	"fmt"
)

// loginClient is go-sasl's LOGIN client (draft-murchison-sasl-login-00)
// made to work without SASL-IR (RFC 4959). go-sasl sends the user name as
// the initial response and only accepts the challenge "Password:". When
// the server does not advertise SASL-IR, imapclient cannot send that
// initial response with the command, and a server such as Dovecot then
// prompts "Username:" first, which go-sasl refuses. This wrapper answers
// that prompt with the user name and leaves everything else to go-sasl.
type loginClient struct {
	inner    Client
	username string
	prompted bool
}

var usernamePrompt = []byte("Username:")

func (c *loginClient) Start() (string, []byte, error) { return c.inner.Start() }

func (c *loginClient) Next(challenge []byte) ([]byte, error) {
	if !c.prompted && bytes.EqualFold(challenge, usernamePrompt) {
		c.prompted = true
		return []byte(c.username), nil
	}
	c.prompted = true
	resp, err := c.inner.Next(challenge)
	if err != nil {
		return nil, fmt.Errorf("sasl: LOGIN: %w", err)
	}
	return resp, nil
}
