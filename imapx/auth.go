package imapx

import (
	"context"
	"errors"
	"fmt"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// This file is the whole authentication step, kept apart so that the
// configured SASL allow-list (PermittedAuthenticationMechanisms) and its
// narrowing can replace it without touching the session.
//
// Today it uses AUTHENTICATE PLAIN when the server advertises AUTH=PLAIN and
// the LOGIN command otherwise, and refuses when the server advertises
// LOGINDISABLED without AUTH=PLAIN.
//
// The password is resolved for this connection only and zeroed once it has
// been sent. Two copies stay outside this package's reach until the garbage
// collector reuses their memory: go-imap encodes the PLAIN response as a
// base64 string, and the LOGIN command takes the password as a string.

// authenticate logs c in as ep.Username. A rejected credential is an
// *AuthenticationError.
func authenticate(ctx context.Context, c *imapclient.Client, ep Endpoint) error {
	caps := c.Caps()
	if caps == nil {
		return &TransportError{Op: "CAPABILITY", Err: errConnectionUnusable}
	}
	usePlain := caps.Has(imap.Cap("AUTH=PLAIN"))
	if !usePlain && caps.Has(imap.CapLoginDisabled) {
		return ErrLoginDisabled
	}
	if ep.Password == nil {
		return errors.New("imapx: the endpoint has no password source")
	}
	password, err := ep.Password(ctx)
	defer clear(password)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("imapx: resolve password: %w", ctx.Err())
		}
		// The resolver's own error names no secret material (internal/secret
		// guarantees that), so it is kept.
		return fmt.Errorf("imapx: resolve password: %w", err)
	}

	mechanism := "LOGIN"
	if usePlain {
		mechanism = "PLAIN"
		pc := &plainClient{username: ep.Username, password: password}
		err = c.Authenticate(pc)
		pc.wipe()
	} else {
		err = c.Login(ep.Username, string(password)).Wait()
	}
	if err == nil {
		return nil
	}
	var imapErr *imap.Error
	if errors.As(err, &imapErr) {
		if imapErr.Type == imap.StatusResponseTypeNo {
			return &AuthenticationError{Mechanism: mechanism, Code: string(imapErr.Code)}
		}
		return &CommandError{Command: authCommand(mechanism), Status: string(imapErr.Type), Code: string(imapErr.Code)}
	}
	return &TransportError{Op: authCommand(mechanism), Err: err}
}

func authCommand(mechanism string) string {
	if mechanism == "LOGIN" {
		return "LOGIN"
	}
	return "AUTHENTICATE " + mechanism
}

// plainClient is a SASL PLAIN client (RFC 4616) that builds its response in
// a slice it can zero, unlike go-sasl's, which takes the password as a
// string. It satisfies go-sasl's Client interface.
type plainClient struct {
	username string
	password []byte
	response []byte
}

func (p *plainClient) Start() (mech string, ir []byte, err error) {
	r := make([]byte, 0, 2+len(p.username)+len(p.password))
	r = append(r, 0)
	r = append(r, p.username...)
	r = append(r, 0)
	r = append(r, p.password...)
	p.response = r
	return "PLAIN", r, nil
}

func (p *plainClient) Next(challenge []byte) ([]byte, error) {
	return nil, errors.New("imapx: unexpected SASL PLAIN challenge")
}

func (p *plainClient) wipe() { clear(p.response) }
