package sasl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

// RFC 2195 §2, the example: user "tim", shared secret "tanstaaftanstaaf".
func TestCramMD5RFC2195Vector(t *testing.T) {
	pw := []byte("tanstaaftanstaaf")
	c := NewCramMD5Client("tim", pw)
	srv := &scripted{challenges: []string{"<1896.697170952@postoffice.reston.mci.net>"}}
	require.NoError(t, Authenticate(srv, c))
	require.Equal(t, "CRAM-MD5", srv.mech)
	require.Nil(t, srv.ir, "no initial response")
	require.Equal(t, []string{"tim b913a602c7eda7a495b4e6e7334d3890"}, srv.responses)
	require.Equal(t, "tanstaaftanstaaf", string(pw), "the password is not modified")
	require.Equal(t, make([]byte, len(c.(*cramMD5Client).resp)), c.(*cramMD5Client).resp, "the response is cleared")
}

func TestCramMD5RefusesOddChallenges(t *testing.T) {
	srv := &scripted{challenges: []string{""}}
	require.ErrorIs(t, Authenticate(srv, NewCramMD5Client("tim", []byte("pw"))), ErrMalformedChallenge)

	srv = &scripted{challenges: []string{"<1@x>", "<2@x>"}}
	err := Authenticate(srv, NewCramMD5Client("tim", []byte("pw")))
	require.Error(t, err)
	requireNoSecret(t, err, "tim", "pw")

	srv = &scripted{challenges: []string{"<1@x>"}, final: errServerNO}
	require.ErrorIs(t, Authenticate(srv, NewCramMD5Client("tim", []byte("pw"))), errServerNO)
}
