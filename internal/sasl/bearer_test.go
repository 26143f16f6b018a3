package sasl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestXOAuth2WireFormat(t *testing.T) {
	tok := []byte("ya29.vF9dft4qmTc2Nvb3RlckBhdHRhdmlzdGEuY29tCg")
	c := NewXOAuth2Client("someuser@example.com", tok)
	srv := &scripted{}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, "XOAUTH2", srv.mech)
	// https://developers.google.com/gmail/imap/xoauth2-protocol
	require.Equal(t, "user=someuser@example.com\x01auth=Bearer ya29.vF9dft4qmTc2Nvb3RlckBhdHRhdmlzdGEuY29tCg\x01\x01", string(srv.ir))
	require.Equal(t, "ya29.vF9dft4qmTc2Nvb3RlckBhdHRhdmlzdGEuY29tCg", string(tok), "the token is not modified")
	ir := c.(*xoauth2Client).ir
	require.Equal(t, make([]byte, len(ir)), ir, "the initial response is cleared")
}

func TestXOAuth2ErrorChallenge(t *testing.T) {
	srv := &scripted{
		challenges: []string{`{"status":"401","schemes":"Bearer","scope":"https://mail.google.com/"}`},
		final:      errServerNO,
	}
	err := Authenticate(srv, NewXOAuth2Client("someuser@example.com", []byte("secret-token")))
	require.Equal(t, []string{""}, srv.responses, "answered with an empty response")
	var be *BearerTokenError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "XOAUTH2", be.Mechanism)
	require.Equal(t, "401", be.Status)
	require.ErrorIs(t, err, errServerNO, "the server's NO is wrapped")
	requireNoSecret(t, err, "secret-token", "someuser", "mail.google.com")

	// Free text in status, or no JSON at all, is still a refusal, without
	// the text.
	for _, ch := range []string{`{"status":"ask your admin at 555-1234"}`, "not json"} {
		srv = &scripted{challenges: []string{ch}, final: errServerNO}
		err = Authenticate(srv, NewXOAuth2Client("u", []byte("t")))
		require.ErrorAs(t, err, &be)
		require.Empty(t, be.Status)
		require.NotContains(t, err.Error(), "admin")
	}

	// A refusal stays a refusal even if the server then says OK.
	srv = &scripted{challenges: []string{`{"status":"400"}`}}
	require.ErrorAs(t, Authenticate(srv, NewXOAuth2Client("u", []byte("t"))), &be)

	// A second challenge is a protocol error.
	srv = &scripted{challenges: []string{`{"status":"400"}`, "again"}}
	require.Error(t, Authenticate(srv, NewXOAuth2Client("u", []byte("t"))))
}

func TestXOAuth2RefusesSeparatorInCredentials(t *testing.T) {
	_, _, err := NewXOAuth2Client("u\x01auth=x", []byte("t")).Start()
	require.ErrorIs(t, err, ErrWrongCredential)
	_, _, err = NewXOAuth2Client("u", []byte("t\x01")).Start()
	require.ErrorIs(t, err, ErrWrongCredential)
	requireNoSecret(t, err, "t\x01")
}

func TestOAuthBearerWireFormat(t *testing.T) {
	c, err := NewClient(OAuthBearer, Credentials{Username: "user@example.com", Token: []byte("vF9dft4qmTc2Nvb3RlckBh"), Host: "server.example.com", Port: 993})
	require.NoError(t, err)
	srv := &scripted{}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, "OAUTHBEARER", srv.mech)
	// RFC 7628 §4.1.
	require.Equal(t, "n,a=user@example.com,\x01host=server.example.com\x01port=993\x01auth=Bearer vF9dft4qmTc2Nvb3RlckBh\x01\x01", string(srv.ir))
}

func TestOAuthBearerErrorChallenge(t *testing.T) {
	c, err := NewClient("oauthbearer", Credentials{Username: "user@example.com", Token: []byte("secret-token")})
	require.NoError(t, err)
	// RFC 7628 §4.3.
	srv := &scripted{
		challenges: []string{`{"status":"invalid_token","scope":"example_scope","openid-configuration":"https://example.com/.well-known/openid-configuration"}`},
		final:      errServerNO,
	}
	err = Authenticate(srv, c)
	require.Equal(t, []string{"\x01"}, srv.responses, "RFC 7628 §3.2.3: answered with %x01")
	var be *BearerTokenError
	require.ErrorAs(t, err, &be)
	require.Equal(t, "OAUTHBEARER", be.Mechanism)
	require.Equal(t, "invalid_token", be.Status)
	require.ErrorIs(t, err, errServerNO)
	requireNoSecret(t, err, "secret-token", "user@example.com", "example_scope")
}
