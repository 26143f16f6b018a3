package workers_test

import (
	"os"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

// TestRotatedPasswordIsUsedByTheNextRun replaces the account's password on
// the server and in its secret file while MailFathom keeps running: the
// next run connects with the new one, because every connection resolves
// the reference again. Neither password reaches a log line or a job.
func TestRotatedPasswordIsUsedByTheNextRun(t *testing.T) {
	t.Parallel()
	b := setupSync(t)
	seed(t, b.user, "INBOX", 2, 30)
	b.start(t)
	b.waitIdle(t)
	require.Len(t, b.stored(t, "INBOX"), 2)
	old := b.user.Password()

	rotated := "rotated-Secret-7c1e"
	b.user.SetPassword(rotated)
	path := b.env["MAILFATHOM_ACCOUNTS_0_PASSWORD"][len("file:"):]
	require.NoError(t, os.WriteFile(path, []byte(rotated+"\n"), 0o600))
	b.user.Append("INBOX", mailgen.Message(30, 9, 2000), time.Now())
	b.runAgain(t)
	require.Len(t, b.stored(t, "INBOX"), 3, "the next run authenticated with the rotated password; logs:\n%s", b.logs.String())

	logs := b.logs.String()
	require.NotContains(t, logs, old)
	require.NotContains(t, logs, rotated)
}

// TestInlineTrustAnchor gives the trusted authority as PEM text in the
// setting itself, which the ReferenceOrInline mode allows.
func TestInlineTrustAnchor(t *testing.T) {
	t.Parallel()
	b := setupSync(t)
	b.env["MAILFATHOM_SECRET_INTERPRETATION_MODE"] = "ReferenceOrInline"
	b.env["MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY"] = string(b.server.CA().CA.CertPEM)
	seed(t, b.user, "INBOX", 2, 31)
	b.start(t)
	b.waitIdle(t)
	require.Len(t, b.stored(t, "INBOX"), 2)
}
