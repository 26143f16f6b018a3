package e2e

import (
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/testca"
)

// TestNoSecretInAnyOutput runs a serve process whose every secret is a
// recognizable sentinel — the IMAP password, the PKCS#12 trust anchor's
// password, the River UI password, the embedding provider's API key —
// through a successful sync and its embedding, a run that fails on a
// rotated-away password, a search the provider refuses the key for, and
// reads of /metrics and of River UI's job API, then searches everything the process produced for the
// sentinels: its log (stdout and stderr), every job's arguments, errors,
// metadata and output, and the metrics exposition. None may appear.
func TestNoSecretInAnyOutput(t *testing.T) {
	t.Parallel()
	b := setup(t, pgtest.Database(t))
	u := b.server.NewUser()
	imapSecret := "imap-sentinel-Qx7" + strings.Repeat("z", 8)
	u.SetPassword(imapSecret)
	seedCorpus(t, u, "INBOX", 20, 3, 8)
	b.addAccount(t, "primary", u)

	// The anchor as a password-protected PKCS#12 bundle whose password is a
	// sentinel of its own.
	bundleSecret := "bundle-sentinel-" + testca.PKCS12Password
	p12, err := b.server.CA().CA.PKCS12(bundleSecret)
	require.NoError(t, err)
	p12File := filepath.Join(b.dir, "ca-sentinel.p12")
	require.NoError(t, os.WriteFile(p12File, p12, 0o600))
	bundlePwFile := filepath.Join(b.dir, "bundle-password")
	require.NoError(t, os.WriteFile(bundlePwFile, []byte(bundleSecret), 0o600))
	b.env["MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY"] = "file:" + p12File
	b.env["MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY_PASSWORD"] = "file:" + bundlePwFile

	uiSecret := "ui-sentinel-" + strings.Repeat("k", 12)
	uiPwFile := filepath.Join(b.dir, "ui-password")
	require.NoError(t, os.WriteFile(uiPwFile, []byte(uiSecret), 0o600))
	b.env["MAILFATHOM_UI_ENABLED"] = "true"
	b.env["MAILFATHOM_UI_USERNAME"] = "operator"
	b.env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPwFile
	b.env["MAILFATHOM_LOG_LEVEL"] = "debug"

	// The embedding provider's API key, which the provider also refuses
	// once synchronization is done.
	embedSecret := "embed-sentinel-" + strings.Repeat("e", 12)
	provider := b.withEmbedding(t, embedtest.Options{APIKey: embedSecret})

	p := b.start(t, "serve")
	b.waitStored(t, 20, time.Minute)
	b.waitEmbedded(t, p, time.Minute)
	provider.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized})
	searchCode, searchBody := searchAPI(t, p.addr(t), "operator", uiSecret, url.Values{"q": {"anything"}, "mode": {"semantic"}})
	require.Equal(t, http.StatusServiceUnavailable, searchCode, searchBody)

	// The password is rotated on the server only: the next run is refused.
	u.SetPassword("rotated-" + imapSecret)
	dbassert.MakeJobsDue(t, b.pool, "account_run", rivertype.JobStateScheduled)
	p.waitLog(t, "the account's next run follows the backoff", time.Minute)

	addr := p.addr(t)
	get := func(path string, auth bool) string {
		req, err := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		require.NoError(t, err)
		if auth {
			req.SetBasicAuth("operator", uiSecret)
		}
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		defer resp.Body.Close()
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, resp.StatusCode, "%s: %s", path, body)
		return string(body)
	}
	metrics := get("/metrics", false)
	require.Contains(t, metrics, "mailfathom_resilience_execution_duration_seconds")
	require.Contains(t, metrics, "mailfathom_embedding_offered_messages_total")
	var cancelledID int64
	poll.Until(t, 30*time.Second, "the refused run is cancelled", func() (bool, string) {
		runs := dbassert.Jobs(t, b.pool, "account_run")
		var states []string
		for _, j := range runs {
			if j.State == rivertype.JobStateCancelled {
				cancelledID = j.ID
				return true, ""
			}
			states = append(states, string(j.State))
		}
		return false, fmt.Sprintf("account runs %v", states)
	})
	uiJobs := get(fmt.Sprintf("/riverui/api/jobs/%d", cancelledID), true) + get("/riverui/api/jobs?state=completed", true)
	require.Contains(t, uiJobs, "MailAuthenticationRejected", "River UI shows the refused run")
	p.stop(t)

	var sw capture.Sweep
	sw.Add("log", p.rawLog())
	sw.Add("jobs", b.jobText(t))
	sw.Add("metrics", metrics)
	sw.Add("River UI", uiJobs)
	sw.Add("search API", searchBody)
	sw.RequireNone(t, imapSecret, "rotated-"+imapSecret, bundleSecret, uiSecret, embedSecret)
	require.Contains(t, p.rawLog(), "anchor", "the trust anchor was loaded (and logged by subject and fingerprint)")
}

// addr is the HTTP address the process logged when it started serving.
func (p *serveProc) addr(t testing.TB) string {
	t.Helper()
	for _, l := range p.logLines() {
		if l.msg() == "serving" {
			if a, ok := l["addr"].(string); ok {
				return a
			}
		}
	}
	t.Fatalf("%s logged no address", p.name)
	return ""
}
