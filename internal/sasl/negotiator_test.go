package sasl_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/sasl"
)

var errRejected = errors.New("NO [AUTHENTICATIONFAILED]")

func TestNegotiatorNeverRestoresAMechanism(t *testing.T) {
	n := sasl.NewNegotiator(sasl.Situation{
		Permitted:          mechs{"PLAIN", "SCRAM-SHA-1", "SCRAM-SHA-256", "DIGEST-MD5"},
		Advertised:         []string{"PLAIN", "LOGIN", "CRAM-MD5", "SCRAM-SHA-1", "SCRAM-SHA-256"},
		CanStayUnencrypted: secTLS, Encrypted: true,
	})
	// Narrowed: advertised and permitted only; never LOGIN or CRAM-MD5.
	require.Equal(t, mechs{sasl.ScramSHA256, sasl.ScramSHA1, sasl.Plain}, n.Remaining())

	var tried []sasl.Mechanism
	for {
		c, err := n.Next()
		if err != nil {
			require.ErrorIs(t, err, sasl.ErrNoMechanismLeft)
			require.NotErrorIs(t, err, sasl.ErrMechanismUnavailable)
			break
		}
		require.False(t, c.LoginCommand, "no LOGIN command once the server has answered")
		tried = append(tried, c.Mechanism)
		n.After(c, errRejected)
	}
	require.Equal(t, mechs{sasl.ScramSHA256, sasl.ScramSHA1, sasl.Plain}, tried)
	require.Empty(t, n.Remaining())

	// Failing again, or failing a mechanism it never had, brings nothing back.
	n.After(sasl.Choice{Mechanism: sasl.ScramSHA256}, errRejected)
	n.After(sasl.Choice{Mechanism: sasl.CramMD5}, errRejected)
	_, err := n.Next()
	require.ErrorIs(t, err, sasl.ErrNoMechanismLeft)
}

func TestNegotiatorFirstChoiceIsChoose(t *testing.T) {
	s := sasl.Situation{Permitted: mechs{"PLAIN", "SCRAM-SHA-256"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true}
	n := sasl.NewNegotiator(s)
	want, err := s.Choose()
	require.NoError(t, err)
	got, err := n.Next()
	require.NoError(t, err)
	require.Equal(t, want, got)
	// Next without After returns the same choice.
	again, err := n.Next()
	require.NoError(t, err)
	require.Equal(t, got, again)
}

func TestNegotiatorUnavailable(t *testing.T) {
	n := sasl.NewNegotiator(sasl.Situation{Permitted: mechs{"CRAM-MD5"}, Advertised: []string{"PLAIN", "SCRAM-SHA-256"}, CanStayUnencrypted: secTLS, Encrypted: true})
	_, err := n.Next()
	require.ErrorIs(t, err, sasl.ErrMechanismUnavailable)
}

func TestNegotiatorLoginCommandOnce(t *testing.T) {
	n := sasl.NewNegotiator(sasl.Situation{Permitted: mechs{"PLAIN"}, CanStayUnencrypted: secTLS, Encrypted: true})
	c, err := n.Next()
	require.NoError(t, err)
	require.True(t, c.LoginCommand)
	n.After(c, errRejected)
	_, err = n.Next()
	require.ErrorIs(t, err, sasl.ErrNoMechanismLeft)
}

func TestNegotiatorEndsWhenTheServerCannotProveItself(t *testing.T) {
	for _, cause := range []error{sasl.ErrServerSignatureMismatch, sasl.ErrServerNotVerified} {
		n := sasl.NewNegotiator(sasl.Situation{Permitted: mechs{"PLAIN", "SCRAM-SHA-256"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true})
		c, err := n.Next()
		require.NoError(t, err)
		require.Equal(t, sasl.ScramSHA256, c.Mechanism)
		n.After(c, cause)
		_, err = n.Next()
		require.ErrorIs(t, err, cause, "no fallback to PLAIN after a forged server signature")
	}
}

func TestNegotiatorMechanismFailureFallsToNextStrongest(t *testing.T) {
	n := sasl.NewNegotiator(sasl.Situation{Permitted: mechs{"SCRAM-SHA-256", "SCRAM-SHA-1"}, Advertised: dovecotDefault, CanStayUnencrypted: secTLS, Encrypted: true})
	c, _ := n.Next()
	n.After(c, &sasl.IterationCountError{Count: 100, Min: sasl.MinIterations, Max: sasl.MaxIterations})
	c, err := n.Next()
	require.NoError(t, err)
	require.Equal(t, sasl.ScramSHA1, c.Mechanism)
}
