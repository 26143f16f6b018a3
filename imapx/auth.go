package imapx

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
	"github.com/mailfathom/mailfathom/internal/sasl"
)

// This file is the whole authentication step. The server's advertised
// mechanisms are narrowed to the account's allow-list and the strongest
// implemented survivor is used, whatever the configured order; the LOGIN
// command is the fallback only where the allow-list already permits clear
// text (see internal/sasl). Nothing is retried here: a rejected credential
// repeated against a mail server is how an account gets locked.
//
// The credential is obtained for this connection only, after the mechanism
// is chosen (so an unavailable mechanism never reads a password or requests
// a token), and zeroed once it has been sent. A token account (Endpoint.Token
// set) authenticates with OAUTHBEARER (RFC 7628) or XOAUTH2 only, never with
// a password and never with the LOGIN command. Copies made by libraries that
// take strings (go-imap's base64 encoding, go-sasl's PLAIN, LOGIN and
// OAUTHBEARER, the LOGIN command) stay outside this package's reach until
// the garbage collector reuses them; PLAIN uses this package's own client,
// which builds its response in a slice it zeroes.

// defaultPermitted is configuration's default allow-list.
var defaultPermitted = []sasl.Mechanism{sasl.Plain, sasl.Login}

// authenticate logs c in as ep.Username over a connection that is
// encrypted or not. A rejected credential is an *AuthenticationError; a
// refusal that throttles a *ThrottledError; no usable mechanism is a
// *sasl.MechanismUnavailableError; a token that could not be obtained is a
// *TokenError.
func authenticate(ctx context.Context, c *imapclient.Client, ep Endpoint, encrypted bool) error {
	caps := c.Caps()
	if caps == nil {
		return &TransportError{Op: "CAPABILITY", Err: wire.ErrConnectionUnusable}
	}
	tokenAccount := ep.Token != nil
	if tokenAccount && ep.Password != nil {
		return errors.New("imapx: the endpoint has both a password and a token source")
	}
	permitted := ep.PermittedMechanisms
	if len(permitted) == 0 {
		permitted = defaultPermitted
	}
	security := ep.Security
	if security == "" {
		security = TLSOnConnect
	}
	choice, err := sasl.Situation{
		Permitted:                     permitted,
		Advertised:                    caps.AuthMechanisms(),
		LoginDisabled:                 caps.Has(imap.CapLoginDisabled),
		CanStayUnencrypted:            security.CanStayUnencrypted(),
		AllowClearTextOverUnencrypted: ep.AllowClearTextOverUnencrypted,
		Encrypted:                     encrypted,
		TokenAccount:                  tokenAccount,
	}.Choose()
	if err != nil {
		if caps.Has(imap.CapLoginDisabled) {
			return fmt.Errorf("%w (%w)", err, ErrLoginDisabled)
		}
		return err
	}
	if tokenAccount {
		return authenticateWithToken(ctx, c, ep, choice.Mechanism)
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
	switch {
	case choice.LoginCommand:
		err = c.Login(ep.Username, string(password)).Wait()
	case choice.Mechanism == sasl.Plain:
		mechanism = "PLAIN"
		pc := &plainClient{username: ep.Username, password: password}
		err = sasl.Authenticate(c, pc)
		pc.wipe()
	default:
		mechanism = string(choice.Mechanism)
		client, cerr := sasl.NewClient(choice.Mechanism, sasl.Credentials{Username: ep.Username, Password: password})
		if cerr != nil {
			return &AuthenticationExchangeError{Mechanism: mechanism, Err: cerr}
		}
		err = sasl.Authenticate(c, client)
	}
	return authenticationOutcome(mechanism, err)
}

// authenticateWithToken runs mechanism, OAUTHBEARER or XOAUTH2, with a
// token obtained now from ep.Token. A refused token is an
// *AuthenticationError, after ep.TokenRefused has been told.
func authenticateWithToken(ctx context.Context, c *imapclient.Client, ep Endpoint, mechanism sasl.Mechanism) error {
	token, err := ep.Token(ctx)
	defer clear(token)
	if err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("imapx: obtain access token: %w", ctx.Err())
		}
		return &TokenError{Err: err}
	}
	// OAUTHBEARER's optional host and port keys (RFC 7628 §3.1) name the
	// server as configured; XOAUTH2 has none.
	client, err := sasl.NewClient(mechanism, sasl.Credentials{Username: ep.Username, Token: token, Host: ep.Host, Port: ep.Port})
	if err != nil {
		return &AuthenticationExchangeError{Mechanism: string(mechanism), Err: err}
	}
	err = authenticationOutcome(string(mechanism), sasl.Authenticate(c, client))
	var authErr *AuthenticationError
	if errors.As(err, &authErr) && ep.TokenRefused != nil {
		ep.TokenRefused()
	}
	return err
}

// authenticationOutcome turns what authenticating with mechanism returned
// into this package's errors. Only a connection that failed with nothing
// from the mechanism is a transient *TransportError; everything the
// mechanism or the server decided is terminal:
//
//   - the server refused the credential — a NO, a bearer token's error
//     challenge (even when the server then drops the connection instead of
//     answering NO), a SCRAM server-final error that refuses the proof or
//     the user — or did not prove it knows the password: an
//     *AuthenticationError;
//   - the client broke the exchange off — a challenge that breaks the
//     mechanism's grammar or is not base64, an iteration count out of
//     range, a SCRAM protocol error, a credential the mechanism cannot
//     carry: an *AuthenticationExchangeError;
//   - a BAD: a *CommandError;
//   - a NO or BAD that throttles ([UNAVAILABLE], [LIMIT], [INUSE], a
//     provider's "too many connections" or "request is throttled"): a
//     *ThrottledError around a *CommandError, since the server has not
//     judged the credential.
func authenticationOutcome(mechanism string, err error) error {
	if err == nil {
		return nil
	}
	var (
		imapErr  *imap.Error
		bearer   *sasl.BearerTokenError
		scramErr *sasl.ScramServerError
		exchange *sasl.ExchangeError
		corrupt  base64.CorruptInputError
	)
	switch {
	case errors.As(err, &bearer):
		// The refusal is the error challenge; what the server does after
		// it does not make the token any better.
		code := ""
		if errors.As(err, &imapErr) {
			code = string(imapErr.Code)
		}
		return &AuthenticationError{Mechanism: mechanism, Code: code}
	case errors.As(err, &imapErr):
		refused := &CommandError{Command: authCommand(mechanism), Status: string(imapErr.Type), Code: string(imapErr.Code)}
		if t := wire.Throttling(string(imapErr.Type), string(imapErr.Code), imapErr.Text); t.Throttles() && !credentialCodes[imapErr.Code] {
			// Not a verdict on the credential: the server will not
			// check one now.
			return throttled(t, refused)
		}
		if imapErr.Type == imap.StatusResponseTypeNo {
			return &AuthenticationError{Mechanism: mechanism, Code: string(imapErr.Code)}
		}
		return refused
	case errors.Is(err, sasl.ErrServerNotVerified), errors.Is(err, sasl.ErrServerSignatureMismatch):
		// The server did not prove it knows the password: never use the
		// session, never retry into a weaker mechanism.
		return &AuthenticationError{Mechanism: mechanism, Code: "ServerNotVerified"}
	case errors.As(err, &scramErr) && scramErr.Refusal():
		// Value is one of RFC 5802's registered names, never server text.
		return &AuthenticationError{Mechanism: mechanism, Code: scramErr.Value}
	case errors.As(err, &exchange), errors.As(err, &corrupt):
		// go-imap decodes each challenge from base64 before the mechanism
		// sees it; a challenge that is not base64 is as malformed as one
		// the mechanism refuses.
		return &AuthenticationExchangeError{Mechanism: mechanism, Err: err}
	}
	return &TransportError{Op: authCommand(mechanism), Err: err}
}

// credentialCodes are the response codes (RFC 5530 §3) by which a server
// says it judged the credential: with one of them, a refusal is a
// rejected credential whatever its text says.
var credentialCodes = map[imap.ResponseCode]bool{
	imap.ResponseCodeAuthenticationFailed: true,
	imap.ResponseCodeAuthorizationFailed:  true,
	imap.ResponseCodeExpired:              true,
	imap.ResponseCodeContactAdmin:         true,
	imap.ResponseCodePrivacyRequired:      true,
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
