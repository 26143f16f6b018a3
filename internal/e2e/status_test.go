package e2e

import (
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestStatusView: the status an operator asks for first, for an account
// that synchronizes, one whose password is wrong and one whose server
// cannot be reached — from the API (behind the UI's password), the page,
// and `mailfathom status`, all agreeing with the metrics.
func TestStatusView(t *testing.T) {
	t.Parallel()
	b := setup(t, dbtest.URL(t))
	uiPassword := filepath.Join(b.dir, "ui-password")
	require.NoError(t, os.WriteFile(uiPassword, []byte("status-secret\n"), 0o600))
	b.env["MAILFATHOM_UI_ENABLED"] = "true"
	b.env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPassword

	good := b.server.NewUser()
	seedCorpus(t, good, "INBOX", 5, 21, 8)
	b.addAccount(t, "good", good)
	refused := b.server.NewUser()
	b.addAccount(t, "refused", refused)
	pw := b.env["MAILFATHOM_ACCOUNTS_1_PASSWORD"]
	require.NoError(t, os.WriteFile(strings.TrimPrefix(pw, "file:"), []byte("wrong\n"), 0o600))
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	_, port, _ := net.SplitHostPort(closed.Addr().String())
	require.NoError(t, closed.Close())
	b.addAccount(t, "unreachable", b.server.NewUser())
	b.env["MAILFATHOM_ACCOUNTS_2_HOST"] = "127.0.0.1"
	b.env["MAILFATHOM_ACCOUNTS_2_PORT"] = port

	p := b.start(t, "serve")
	b.waitSynced(t, p, 5, time.Minute)
	get := func(path string, auth bool) (int, []byte) {
		req, err := http.NewRequest(http.MethodGet, "http://"+p.addr(t)+path, nil)
		require.NoError(t, err)
		if auth {
			req.SetBasicAuth("admin", "status-secret")
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return resp.StatusCode, body
	}
	var rep status.Report
	byID := map[string]status.Account{}
	var answered []byte
	poll.Every(t, 500*time.Millisecond, time.Minute, "the two failing accounts show their failures", func() bool {
		var code int
		code, answered = get("/api/v1/status", true)
		require.Equal(t, http.StatusOK, code)
		rep = status.Report{}
		require.NoError(t, json.Unmarshal(answered, &rep))
		for _, a := range rep.Accounts {
			byID[a.ID] = a
		}
		u := byID["unreachable"]
		return byID["refused"].LastFailure != nil && u.NextRun != nil && u.NextRun.Why == status.WhyRetry
	}, func() string { return string(answered) })

	ok := byID["good"]
	require.Zero(t, ok.ConsecutiveFailures)
	require.Equal(t, status.WhyInterval, ok.NextRun.Why)
	require.InDelta(t, time.Hour.Seconds(), ok.NextRun.InSeconds, 60)
	require.Len(t, ok.Folders, 1)
	inbox := ok.Folders[0]
	require.Equal(t, "INBOX", inbox.Alias)
	require.Equal(t, "Polling", inbox.EffectiveMode)
	require.Equal(t, 5, inbox.Messages.Stored)
	require.Equal(t, 5, inbox.Handled["stored"])
	require.NotNil(t, inbox.LastSuccessAgeSeconds)
	require.NotZero(t, inbox.Checkpoint.UIDValidity)
	require.EqualValues(t, 5, inbox.Checkpoint.LastSeenUID)
	require.Zero(t, inbox.Mutations, "no mailbox mutation was asked for")
	require.Nil(t, rep.Embedding, "no embedding profile is configured")
	require.Nil(t, inbox.AwaitingVectors)

	bad := byID["refused"]
	require.Equal(t, "MailAuthenticationRejected", bad.LastFailure.Identity)
	require.Equal(t, 1, bad.ConsecutiveFailures)
	require.Equal(t, status.WhyBackoff, bad.NextRun.Why)
	require.Equal(t, time.Hour.Seconds(), bad.BackoffSeconds, "the backoff caps at MAX_FAILURE_BACKOFF")

	down := byID["unreachable"]
	require.Equal(t, "MailboxUnavailable", down.LastFailure.Identity)
	require.Greater(t, down.NextRun.InSeconds, 0.0)

	// Behind the UI's password; the page renders the same.
	code, _ := get("/api/v1/status", false)
	require.Equal(t, http.StatusUnauthorized, code)
	code, page := get("/status", true)
	require.Equal(t, http.StatusOK, code)
	require.Contains(t, string(page), "MailAuthenticationRejected")

	// The command reads the same report.
	cmd := exec.Command(binary(t), "status", "-json")
	cmd.Env = fromEnv(b.env)
	out, err := cmd.Output()
	require.NoError(t, err)
	var fromCmd status.Report
	require.NoError(t, json.Unmarshal(out, &fromCmd))
	for _, a := range fromCmd.Accounts {
		require.Equal(t, byID[a.ID].ConsecutiveFailures, a.ConsecutiveFailures, a.ID)
		require.Equal(t, byID[a.ID].Folders[0].Messages, a.Folders[0].Messages, a.ID)
	}
	cmd = exec.Command(binary(t), "status")
	cmd.Env = fromEnv(b.env)
	table, err := cmd.Output()
	require.NoError(t, err)
	require.Contains(t, string(table), "good/INBOX")
	require.Contains(t, string(table), "MailAuthenticationRejected")

	// And the metrics carry the same figures.
	_, body := get("/metrics", false)
	parser := expfmt.NewTextParser(model.LegacyValidation)
	families, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	require.NoError(t, err)
	metric := func(name string, labels ...string) float64 {
		t.Helper()
		f, ok := families[name]
		require.True(t, ok, name)
		for _, m := range f.GetMetric() {
			got := map[string]string{}
			for _, l := range m.GetLabel() {
				got[l.GetName()] = l.GetValue()
			}
			match := true
			for i := 0; i+1 < len(labels); i += 2 {
				match = match && got[labels[i]] == labels[i+1]
			}
			if match {
				return m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		t.Fatalf("no %s%v", name, labels)
		return 0
	}
	for _, a := range rep.Accounts {
		require.Equal(t, float64(a.ConsecutiveFailures), metric("mailfathom_account_consecutive_failures", "account", a.ID), a.ID)
		require.Equal(t, a.BackoffSeconds, metric("mailfathom_account_backoff_seconds", "account", a.ID), a.ID)
		for _, f := range a.Folders {
			for _, outcome := range status.Outcomes {
				require.Equal(t, float64(f.Handled[outcome]), metric("mailfathom_folder_messages_total", "account", a.ID, "alias", f.Alias, "outcome", outcome))
			}
			require.Equal(t, float64(f.Messages.Stored), metric("mailfathom_folder_stored_messages", "account", a.ID, "alias", f.Alias, "state", "stored"))
			require.Equal(t, float64(f.Messages.Tombstoned), metric("mailfathom_folder_stored_messages", "account", a.ID, "alias", f.Alias, "state", "tombstoned"))
			for _, state := range status.MutationStates {
				require.Equal(t, float64(f.Mutations.ByState(state)), metric("mailfathom_folder_mailbox_mutations_outstanding", "account", a.ID, "alias", f.Alias, "state", state))
			}
		}
	}
	require.NotContains(t, string(body)+string(out)+string(page), "status-secret")
}

// fromEnv turns an environment map into a process environment.
func fromEnv(env map[string]string) []string {
	var out []string
	for k, v := range env {
		out = append(out, k+"="+v)
	}
	return out
}
