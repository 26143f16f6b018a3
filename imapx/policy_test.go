package imapx_test

import (
	"context"
	"net"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/sasl"
)

// TestPolicyEnforcedAtConnect: the adapter checks the transport security
// policy it is handed before it dials, whatever built the endpoint: a mode
// that can stay unencrypted without its opt-in, or clear-text mechanisms on
// such a mode without theirs, never reaches the network.
func TestPolicyEnforcedAtConnect(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		edit func(*imapx.Endpoint)
		rule string
	}{
		{"NoneWithoutOptIn", func(ep *imapx.Endpoint) {
			ep.Security, ep.AllowInsecureConnection = imapx.None, false
		}, imapx.RuleUnencryptedConnectionRequiresExplicitOptIn},
		{"StartTLSWhenAvailableWithoutOptIn", func(ep *imapx.Endpoint) {
			ep.Security, ep.AllowInsecureConnection = imapx.StartTLSWhenAvailable, false
		}, imapx.RuleUnencryptedConnectionRequiresExplicitOptIn},
		{"AutoWithoutOptIn", func(ep *imapx.Endpoint) {
			ep.Security, ep.AllowInsecureConnection = imapx.Auto, false
		}, imapx.RuleUnencryptedConnectionRequiresExplicitOptIn},
		{"DefaultClearTextMechanismsOnNoneWithoutOptIn", func(ep *imapx.Endpoint) {
			ep.Security, ep.AllowClearTextOverUnencrypted, ep.PermittedMechanisms = imapx.None, false, nil
		}, imapx.RuleClearTextAuthenticationRequiresExplicitOptIn},
		{"UnknownMode", func(ep *imapx.Endpoint) { ep.Security = "Opportunistic" }, imapx.RuleConnectionSecurityUnknown},
		// Skipped rather than refused, the -PLUS name would leave PLAIN.
		{"UnimplementedMechanismBesidePlain", func(ep *imapx.Endpoint) {
			ep.PermittedMechanisms = []sasl.Mechanism{sasl.ScramSHA256Plus, sasl.Plain}
		}, imapx.RuleAuthenticationMechanismNotSupported},
		{"UnimplementedMechanismOnTLS", func(ep *imapx.Endpoint) {
			ep.Security, ep.PermittedMechanisms = imapx.TLSOnConnect, []sasl.Mechanism{sasl.NTLM, sasl.ScramSHA256}
		}, imapx.RuleAuthenticationMechanismNotSupported},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b := setup(t, nil)
			ep := b.endpoint(imapx.None)
			dialed := 0
			ep.Dial = func(ctx context.Context, network, addr string) (net.Conn, error) {
				dialed++
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			}
			tc.edit(&ep)
			_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
			var v *imapx.PolicyViolationError
			require.ErrorAs(t, err, &v)
			require.Equal(t, tc.rule, v.Rule)
			require.Contains(t, err.Error(), "["+tc.rule+"]")
			require.False(t, imapx.IsTransient(err))
			require.Zero(t, dialed, "nothing was sent")
			require.Zero(t, b.passwordCalls.get())
		})
	}

	t.Run("OptedInConnects", func(t *testing.T) {
		t.Parallel()
		b := setup(t, nil)
		ep := b.endpoint(imapx.None) // both opt-ins set
		s, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
		ep.PermittedMechanisms = []sasl.Mechanism{sasl.ScramSHA256}
		ep.AllowClearTextOverUnencrypted = false // not needed without clear-text mechanisms
		s, err = imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
		require.NoError(t, err)
		require.NoError(t, s.Close())
	})
}
