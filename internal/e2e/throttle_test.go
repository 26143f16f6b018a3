package e2e

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestThrottledAccountIsSnoozedNotFailed runs the built binary against a
// server that refuses the login as Gmail does when an account holds too
// many connections: the account is snoozed and shown as throttled — by
// the API, the page, `mailfathom status` and the metrics — with no failed
// run, asks the server once, and a restart does not make it ask again
// before its time. Dovecot cannot be made to throttle, so a scripted
// server plays the provider.
func TestThrottledAccountIsSnoozedNotFailed(t *testing.T) {
	t.Parallel()
	srv := imapscript.Start(t, func(c *imapscript.Conn) {
		c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN")
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		c.Send(tag + " NO [ALERT] Too many simultaneous connections. (Failure)")
		c.Serve()
	})
	b := setup(t, dbtest.URL(t))
	uiPassword := filepath.Join(b.dir, "ui-password")
	require.NoError(t, os.WriteFile(uiPassword, []byte("throttle-secret\n"), 0o600))
	b.env["MAILFATHOM_UI_ENABLED"] = "true"
	b.env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPassword
	b.addAccount(t, "gmail", b.server.NewUser())
	for k, v := range map[string]string{
		"HOST": srv.Host(), "PORT": srv.PortText(), "CONNECTION_SECURITY": "None",
		"ALLOW_INSECURE_CONNECTION": "true", "ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION": "true",
		"PERMITTED_AUTHENTICATION_MECHANISMS": "PLAIN",
	} {
		b.env["MAILFATHOM_ACCOUNTS_0_"+k] = v
	}
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST")
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY")

	p := b.start(t, "serve")
	get := func(p *serveProc, path string) []byte {
		req, err := http.NewRequest(http.MethodGet, "http://"+p.addr(t)+path, nil)
		require.NoError(t, err)
		req.SetBasicAuth("admin", "throttle-secret")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, path)
		return body
	}
	var acct status.Account
	poll.Every(t, 200*time.Millisecond, time.Minute, "the account shows as throttled", func() bool {
		var rep status.Report
		require.NoError(t, json.Unmarshal(get(p, "/api/v1/status"), &rep))
		acct = rep.Accounts[0]
		// Until the run's snooze is committed, the run shows as running.
		return acct.Throttled != nil && acct.NextRun != nil && acct.NextRun.Why == status.WhyThrottle
	}, func() string { return fmt.Sprintf("%+v", acct) })
	require.Equal(t, "TooManyConnections", acct.Throttled.Reason)
	require.Nil(t, acct.Throttled.SuggestedDelaySeconds)
	require.InDelta(t, time.Hour.Seconds(), acct.Throttled.InSeconds, 120, "no suggested time: the run backoff")
	require.Zero(t, acct.ConsecutiveFailures)
	require.Nil(t, acct.LastFailure, "a throttle is no failure")
	require.NotNil(t, acct.NextRun)
	require.Equal(t, status.WhyThrottle, acct.NextRun.Why)
	require.Contains(t, string(get(p, "/status")), "Throttled by the server until")
	require.Contains(t, string(get(p, "/metrics")), `mailfathom_account_throttled_total{account="gmail",reason="TooManyConnections"} 1`)

	cmd := exec.Command(binary(t), "status")
	cmd.Env = fromEnv(b.env)
	out, err := cmd.Output()
	require.NoError(t, err)
	require.Contains(t, string(out), "gmail: throttled by the server until ")
	require.Contains(t, string(out), "(reason TooManyConnections)")
	require.NotContains(t, string(out), "simultaneous", "no server text")

	// Nothing asks the server again while the throttle holds: not the
	// process, not a restart (which makes every other account due at once).
	// Only the account's run would ask it, and the run waits for the
	// throttle's end: read before the connections, a wait that far off
	// means no run came in between, and a run made due shows as due,
	// running or a second connection, whenever it is looked at.
	nextRun := func() time.Duration {
		t.Helper()
		var next *dbassert.Job
		for _, j := range dbassert.Jobs(t, b.pool, "account_run") {
			if j.State == rivertype.JobStateScheduled || j.State == rivertype.JobStateAvailable {
				next = &j
			}
		}
		require.NotNil(t, next, "the account has a next run")
		return time.Until(next.ScheduledAt)
	}
	require.Greater(t, nextRun(), 50*time.Minute, "the account's next run is when the throttle ends")
	require.Equal(t, 1, srv.Connections())
	p.stop(t)
	// The restart schedules every account before it serves.
	p = b.start(t, "serve-again")
	_ = p.addr(t)
	due := nextRun()
	require.Equal(t, 1, srv.Connections(), "the restart waited for the throttle")
	require.Greater(t, due, 50*time.Minute, "the account's next run is when the throttle ends")
	require.NotContains(t, p.rawLog(), "simultaneous")
	state, ok, err := mailstore.ReadAccountState(t.Context(), b.pool, "gmail")
	require.NoError(t, err)
	require.True(t, ok, "the account ran")
	require.Zero(t, state.ConsecutiveFailures)
}
