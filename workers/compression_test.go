package workers_test

import (
	"context"
	"crypto/sha256"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/status"
)

// TestCompressionDecisionIsShown: with the default
// MAILFATHOM_ACCOUNTS_<i>_COMPRESSION (auto), a pass against a Dovecot on
// the loopback reads uncompressed, and the status view says so and why;
// with on, the pass reads compressed, stores every message byte for byte,
// and the status view says that.
func TestCompressionDecisionIsShown(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		policy string
		want   status.Compression
	}{
		{"", status.Compression{InUse: false, Reason: "the server is on a loopback address"}},
		{"on", status.Compression{InUse: true, Reason: "configured on"}},
		{"off", status.Compression{InUse: false, Reason: "configured off"}},
	} {
		t.Run("Policy"+tc.policy, func(t *testing.T) {
			t.Parallel()
			b := setupSync(t)
			if tc.policy != "" {
				b.env["MAILFATHOM_ACCOUNTS_0_COMPRESSION"] = tc.policy
			}
			raws := seed(t, b.user, "INBOX", 30, 5)
			b.start(t)
			b.waitIdle(t)
			rows := b.stored(t, "INBOX")
			require.Len(t, rows, len(raws))
			for i, r := range rows {
				sum := sha256.Sum256(raws[i])
				require.Equal(t, sum[:], r.sha, "uid %d", r.uid)
			}
			assertUnseen(t, b.user, "INBOX")

			var environ []string
			for k, v := range b.env {
				environ = append(environ, k+"="+v)
			}
			cfg, err := config.Load(environ)
			require.NoError(t, err)
			rep, err := status.Read(context.Background(), b.pool, status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }})
			require.NoError(t, err)
			require.Len(t, rep.Accounts, 1)
			require.NotNil(t, rep.Accounts[0].Compression)
			require.Equal(t, tc.want, *rep.Accounts[0].Compression)
		})
	}
}
