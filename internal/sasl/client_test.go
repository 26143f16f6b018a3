package sasl

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
)

func TestNewClientMechanisms(t *testing.T) {
	pw := Credentials{Username: "u", Password: []byte("p")}
	tok := Credentials{Username: "u", Token: []byte("t")}
	for _, tc := range []struct {
		m    config.AuthenticationMechanism
		cred Credentials
	}{
		{config.ScramSHA256, pw}, {config.ScramSHA1, pw}, {config.CramMD5, pw},
		{config.Plain, pw}, {config.Login, pw},
		{config.OAuthBearer, tok}, {config.XOAuth2, tok},
		{"scram-sha-256", pw},
	} {
		c, err := NewClient(tc.m, tc.cred)
		require.NoError(t, err, tc.m)
		mech, _, err := c.Start()
		require.NoError(t, err)
		require.Equal(t, config.AuthenticationMechanism(mech), config.AuthenticationMechanism(upper(tc.m)))
		require.True(t, Implemented(tc.m))
	}
}

func upper(m config.AuthenticationMechanism) string {
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
	for _, m := range []config.AuthenticationMechanism{
		config.DigestMD5, config.NTLM, config.ScramSHA512, config.ScramSHA512Plus,
		config.ScramSHA256Plus, config.ScramSHA1Plus, "GSSAPI",
	} {
		_, err := NewClient(m, pw)
		require.ErrorIs(t, err, ErrNotImplemented, m)
		require.False(t, Implemented(m))
	}
	for _, tc := range []struct {
		m    config.AuthenticationMechanism
		cred Credentials
	}{
		{config.ScramSHA256, tok}, {config.Plain, tok}, {config.CramMD5, Credentials{Username: "u"}},
		{config.XOAuth2, pw}, {config.OAuthBearer, Credentials{Username: "u"}},
		{config.Plain, Credentials{Username: "u", Password: []byte("p"), Token: []byte("t")}},
	} {
		_, err := NewClient(tc.m, tc.cred)
		require.ErrorIs(t, err, ErrWrongCredential, tc.m)
		requireNoSecret(t, err, "\"p\"", "\"t\"")
	}
}

func TestPlainWireFormat(t *testing.T) {
	c, err := NewClient(config.Plain, Credentials{Username: "tim", Password: []byte("tanstaaf")})
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
	c, err := NewClient(config.Login, cred)
	require.NoError(t, err)
	srv := &scripted{challenges: []string{"Password:"}}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, "tim", string(srv.ir))
	require.Equal(t, []string{"tanstaaf"}, srv.responses)

	// Without it, the server prompts for the user name first.
	c, err = NewClient(config.Login, cred)
	require.NoError(t, err)
	srv = &scripted{challenges: []string{"Username:", "Password:"}}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, []string{"tim", "tanstaaf"}, srv.responses)

	// Anything else is refused without echoing the challenge.
	c, err = NewClient(config.Login, cred)
	require.NoError(t, err)
	srv = &scripted{challenges: []string{"Username:", "Your secret word?"}}
	err = Authenticate(srv, c)
	require.Error(t, err)
	requireNoSecret(t, err, "secret word", "tanstaaf")
}
