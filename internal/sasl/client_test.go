package sasl

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestNewClientMechanisms(t *testing.T) {
	pw := Credentials{Username: "u", Password: []byte("p")}
	tok := Credentials{Username: "u", Token: []byte("t")}
	for _, tc := range []struct {
		m    Mechanism
		cred Credentials
	}{
		{ScramSHA512, pw}, {ScramSHA256, pw}, {ScramSHA1, pw}, {CramMD5, pw},
		{Plain, pw}, {Login, pw},
		{OAuthBearer, tok}, {XOAuth2, tok},
		{"scram-sha-256", pw},
	} {
		c, err := NewClient(tc.m, tc.cred)
		require.NoError(t, err, tc.m)
		mech, _, err := c.Start()
		require.NoError(t, err)
		require.Equal(t, Mechanism(mech), Mechanism(upper(tc.m)))
		require.True(t, Implemented(tc.m))
	}
}

func upper(m Mechanism) string {
	b := []byte(m)
	for i, c := range b {
		if c >= 'a' && c <= 'z' {
			b[i] = c - 'a' + 'A'
		}
	}
	return string(b)
}

func TestNewClientRefusals(t *testing.T) {
	pw := Credentials{Username: "u", Password: []byte("p")}
	tok := Credentials{Username: "u", Token: []byte("t")}
	for _, m := range append([]Mechanism{"GSSAPI"}, Unimplemented...) {
		_, err := NewClient(m, pw)
		require.ErrorIs(t, err, ErrNotImplemented, m)
		require.False(t, Implemented(m))
	}
	for _, tc := range []struct {
		m    Mechanism
		cred Credentials
	}{
		{ScramSHA256, tok}, {Plain, tok}, {CramMD5, Credentials{Username: "u"}},
		{XOAuth2, pw}, {OAuthBearer, Credentials{Username: "u"}},
		{Plain, Credentials{Username: "u", Password: []byte("p"), Token: []byte("t")}},
	} {
		_, err := NewClient(tc.m, tc.cred)
		require.ErrorIs(t, err, ErrWrongCredential, tc.m)
		requireNoSecret(t, err, "\"p\"", "\"t\"")
	}
}

func TestPlainWireFormat(t *testing.T) {
	c, err := NewClient(Plain, Credentials{Username: "tim", Password: []byte("tanstaaf")})
	require.NoError(t, err)
	srv := &scripted{}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, "PLAIN", srv.mech)
	require.Equal(t, "\x00tim\x00tanstaaf", string(srv.ir)) // RFC 4616 §2
}

func TestLoginWithAndWithoutInitialResponse(t *testing.T) {
	cred := Credentials{Username: "tim", Password: []byte("tanstaaf")}
	// With SASL-IR the user name went with the command; the server asks
	// only for the password.
	c, err := NewClient(Login, cred)
	require.NoError(t, err)
	srv := &scripted{challenges: []string{"Password:"}}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, "tim", string(srv.ir))
	require.Equal(t, []string{"tanstaaf"}, srv.responses)

	// Without it, the server prompts for the user name first.
	c, err = NewClient(Login, cred)
	require.NoError(t, err)
	srv = &scripted{challenges: []string{"Username:", "Password:"}}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, []string{"tim", "tanstaaf"}, srv.responses)

	// Anything else is refused without echoing the challenge.
	c, err = NewClient(Login, cred)
	require.NoError(t, err)
	srv = &scripted{challenges: []string{"Username:", "Your secret word?"}}
	err = Authenticate(srv, c)
	require.Error(t, err)
	requireNoSecret(t, err, "secret word", "tanstaaf")
}

// TestAuthenticateMarksTheMechanismsOwnErrors: what the mechanism's client
// refuses reaches the caller as an *ExchangeError that keeps its cause;
// the server's answer and a connection's failure do not.
func TestAuthenticateMarksTheMechanismsOwnErrors(t *testing.T) {
	v := scramVectors[1]
	for name, tc := range map[string]struct {
		srv      *scripted
		client   Client
		exchange bool
		cause    error
	}{
		"malformed challenge": {
			srv: &scripted{challenges: []string{"s=no-nonce"}}, client: v.client(v.nonce),
			exchange: true, cause: ErrMalformedChallenge,
		},
		"refused in Start": {
			srv: &scripted{}, client: NewXOAuth2Client("a\x01b", []byte("t")),
			exchange: true, cause: ErrWrongCredential,
		},
		"forged server signature": {
			srv: &scripted{challenges: []string{v.serverFirst, "v=AAAA"}}, client: v.client(v.nonce),
			exchange: true, cause: ErrServerSignatureMismatch,
		},
		"the server's NO": {
			srv: &scripted{challenges: []string{v.serverFirst}, final: errServerNO}, client: v.client(v.nonce),
			cause: errServerNO,
		},
	} {
		t.Run(name, func(t *testing.T) {
			err := Authenticate(tc.srv, tc.client)
			require.ErrorIs(t, err, tc.cause)
			var xe *ExchangeError
			require.Equal(t, tc.exchange, errors.As(err, &xe), "%v", err)
		})
	}
}

func TestScramServerErrorRefusal(t *testing.T) {
	for value, refusal := range map[string]bool{
		"invalid-proof": true, "unknown-user": true, "invalid-username-encoding": true,
		"no-resources": true, "other-error": true,
		"invalid-encoding": false, "extensions-not-supported": false,
		"channel-bindings-dont-match": false, "server-does-support-channel-binding": false,
		"channel-binding-not-supported": false, "unsupported-channel-binding-type": false,
	} {
		require.True(t, scramServerErrors[value], value)
		require.Equal(t, refusal, (&ScramServerError{Value: value}).Refusal(), value)
	}
	require.Len(t, scramServerErrors, 11, "every registered value is classified above")
}

// TestEveryAllowedNameIsImplemented: an allow-list can only hold names
// NewClient can build, and every registered name this package knows is
// either one of them or listed as unimplemented, never both.
func TestEveryAllowedNameIsImplemented(t *testing.T) {
	known := map[Mechanism]bool{}
	for _, m := range Mechanisms {
		require.True(t, Implemented(m), m)
		known[m] = true
	}
	for _, m := range Unimplemented {
		require.False(t, Implemented(m), m)
		require.False(t, known[m], m)
		known[m] = true
	}
	require.Len(t, known, len(strength), "every ranked mechanism is in one list")
	for _, m := range strength {
		require.True(t, known[m], m)
	}
}
