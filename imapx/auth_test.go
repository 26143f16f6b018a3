package imapx_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/sasl"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
)

// TestAuthenticationFollowsTheAllowList checks the narrowing end to end:
// the strongest permitted mechanism the server offers is used whatever the
// configured order, and an allow-list the server cannot satisfy ends before
// any password is read.
func TestAuthenticationFollowsTheAllowList(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t, dovecot.WithAuthMechanisms("plain", "login", "scram-sha-1", "scram-sha-256"))

	t.Run("ScramOverPlainWhateverTheOrder", func(t *testing.T) {
		t.Parallel()
		b := setup(t, srv)
		ep := b.endpoint(imapx.TLSOnConnect)
		ep.PermittedMechanisms = []config.AuthenticationMechanism{config.Plain, config.ScramSHA256}
		s := b.open(ep, imapx.SessionOptions{})
		require.NotNil(t, s)
		srv.WaitLog("user=<"+b.user.Name()+">, method=SCRAM-SHA-256", dovecot.LogWait)
	})

	t.Run("NoPermittedMechanismReadsNoPassword", func(t *testing.T) {
		t.Parallel()
		b := setup(t, srv)
		ep := b.endpoint(imapx.TLSOnConnect)
		ep.PermittedMechanisms = []config.AuthenticationMechanism{config.CramMD5}
		_, err := imapx.OpenReadSession(b.ctx, ep, imapx.SessionOptions{})
		require.ErrorIs(t, err, sasl.ErrMechanismUnavailable)
		require.Contains(t, err.Error(), "MailAuthenticationMechanismUnavailable")
		require.Zero(t, b.passwordCalls.get(), "the password is never resolved")
		require.False(t, imapx.IsTransient(err))
	})
}
