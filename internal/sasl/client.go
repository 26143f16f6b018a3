package sasl

import (
	"fmt"
	"strings"

	gosasl "github.com/emersion/go-sasl"
)

// Client is go-sasl's client interface, which imapclient's Authenticate
// runs: Start names the mechanism and returns the initial response, Next
// answers each server challenge.
type Client = gosasl.Client

// Finisher is implemented by the clients of this package whose outcome the
// server's tagged response alone does not settle: SCRAM must have verified
// the server's signature, and XOAUTH2 and OAUTHBEARER report a refused
// token. Finish takes what imapclient's Authenticate returned and returns
// the exchange's outcome; it also clears the buffers the client derived
// from the credential. Authenticate calls it.
type Finisher interface {
	Finish(serverErr error) error
}

// Authenticator is what Authenticate drives; *imapclient.Client is one.
type Authenticator interface {
	Authenticate(Client) error
}

// Authenticate runs c on a (an *imapclient.Client) and settles the outcome
// with c's Finish when it has one. It returns nil only when the server
// accepted the credential and, for SCRAM, proved it knows the password.
//
// What it returns otherwise says where the exchange ended:
//
//   - an error wrapping an *imap.Error is the server's tagged answer and
//     leaves the connection usable;
//   - a *BearerTokenError is a token the server refused, whatever the
//     server did after its error challenge (answered NO, or dropped the
//     connection);
//   - an *ExchangeError is the client's own refusal: c's Start or Next
//     failed (ErrServerSignatureMismatch, an *IterationCountError, a
//     *ScramServerError, ErrMalformedChallenge, ...). imapclient has then
//     returned without ending the AUTHENTICATE command, so the connection
//     must be closed;
//   - ErrServerNotVerified leaves the connection authenticated to a server
//     that did not prove its identity: close it too;
//   - anything else came from the connection itself (it dropped, timed out
//     or could not be read) with nothing from the mechanism.
func Authenticate(a Authenticator, c Client) error {
	err := a.Authenticate(exchange{c})
	if f, ok := c.(Finisher); ok {
		return f.Finish(err)
	}
	return err
}

// exchange is the client Authenticate hands to the server side: c, with
// every error of its Start and Next marked as an *ExchangeError.
type exchange struct{ c Client }

func (x exchange) Start() (string, []byte, error) {
	mech, ir, err := x.c.Start()
	if err != nil {
		return mech, ir, &ExchangeError{Err: err}
	}
	return mech, ir, nil
}

func (x exchange) Next(challenge []byte) ([]byte, error) {
	resp, err := x.c.Next(challenge)
	if err != nil {
		return resp, &ExchangeError{Err: err}
	}
	return resp, nil
}

// Credentials is what a mechanism authenticates with: a password for the
// password mechanisms, a bearer token for XOAUTH2 and OAUTHBEARER. The
// caller owns Password and Token and clears them after the exchange.
type Credentials struct {
	// Username is the account's user name (the SASL authentication
	// identity). No authorization identity is ever sent apart from it.
	Username string
	// Password is the account's password, for a password account.
	Password []byte
	// Token is the OAuth 2.0 access token, for a token account.
	Token []byte
	// Host and Port are OAUTHBEARER's optional "host" and "port" keys
	// (RFC 7628 §3.1); zero leaves them out.
	Host string
	Port int
}

// NewClient returns the client for mechanism m. The password mechanisms
// need cred.Password and refuse a token; the token mechanisms need
// cred.Token and refuse a password. A mechanism this package does not
// implement (Unimplemented: DIGEST-MD5, NTLM, the -PLUS variants) is
// ErrNotImplemented; Choose never picks one.
//
// PLAIN (RFC 4616), LOGIN and OAUTHBEARER (RFC 7628) are go-sasl's clients;
// LOGIN and OAUTHBEARER are wrapped so that they also work without SASL-IR
// and on a refused token respectively (see login.go and xoauth2.go).
func NewClient(m Mechanism, cred Credentials) (Client, error) {
	m = Mechanism(strings.ToUpper(string(m)))
	token := m.Token()
	if _, ok := implemented[m]; !ok {
		return nil, fmt.Errorf("%w: %s", ErrNotImplemented, m)
	}
	if token && (cred.Token == nil || cred.Password != nil) || !token && (cred.Password == nil || cred.Token != nil) {
		return nil, fmt.Errorf("%w: %s", ErrWrongCredential, m)
	}
	switch m {
	case ScramSHA512:
		return NewScramSHA512Client(cred.Username, cred.Password), nil
	case ScramSHA256:
		return NewScramSHA256Client(cred.Username, cred.Password), nil
	case ScramSHA1:
		return NewScramSHA1Client(cred.Username, cred.Password), nil
	case CramMD5:
		return NewCramMD5Client(cred.Username, cred.Password), nil
	case OAuthBearer:
		return &oauthBearerClient{inner: gosasl.NewOAuthBearerClient(&gosasl.OAuthBearerOptions{
			Username: cred.Username, Token: string(cred.Token), Host: cred.Host, Port: cred.Port,
		})}, nil
	case XOAuth2:
		return NewXOAuth2Client(cred.Username, cred.Token), nil
	case Plain:
		return gosasl.NewPlainClient("", cred.Username, string(cred.Password)), nil
	case Login:
		return &loginClient{inner: gosasl.NewLoginClient(cred.Username, string(cred.Password)), username: cred.Username}, nil
	}
	return nil, fmt.Errorf("%w: %s", ErrNotImplemented, m)
}
