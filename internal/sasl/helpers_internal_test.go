package sasl

import (
	"bytes"
	"errors"
	"testing"

	"github.com/stretchr/testify/require"
)

// scripted is an Authenticator that plays a server from a script: it sends
// each challenge in turn, records the client's answers and ends with final.
type scripted struct {
	challenges []string
	final      error

	mech      string
	ir        []byte
	responses []string
}

func (s *scripted) Authenticate(c Client) error {
	mech, ir, err := c.Start()
	if err != nil {
		return err
	}
	s.mech = mech
	if ir != nil {
		s.ir = bytes.Clone(ir) // the client may clear its own once done
	}
	for _, ch := range s.challenges {
		resp, err := c.Next([]byte(ch))
		if err != nil {
			return err
		}
		s.responses = append(s.responses, string(resp))
	}
	return s.final
}

var errServerNO = errors.New("server said NO")

// requireNoSecret asserts that err's text holds none of the secrets.
func requireNoSecret(t *testing.T, err error, secrets ...string) {
	t.Helper()
	require.Error(t, err)
	for _, s := range secrets {
		require.NotContains(t, err.Error(), s)
	}
}
