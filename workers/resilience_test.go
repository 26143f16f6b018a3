package workers_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"

	"github.com/mailfathom/mailfathom/riverui"
)

// TestFailuresReachRiverClassified runs the workers against Dovecot with
// accounts that fail and checks what River — and River UI — make of it.
func TestFailuresReachRiverClassified(t *testing.T) {
	t.Parallel()

	t.Run("WrongPasswordIsTriedOncePerRunAndCancelled", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		wrong := "wrong-" + b.user.Password()
		pwFile := strings.TrimPrefix(b.env["MAILFATHOM_ACCOUNTS_0_PASSWORD"], "file:")
		require.NoError(t, os.WriteFile(pwFile, []byte(wrong), 0o600))
		b.start(t)
		b.waitIdle(t)

		authentications := func() int { return strings.Count(b.server.Log(), "("+b.user.Name()+",") }
		require.Equal(t, 1, authentications(), "one authentication in the run")
		runs := b.jobs(t, "account_run")
		require.Len(t, runs, 2, "the failed run and the next one")
		require.Equal(t, "cancelled", runs[0].state)
		require.Equal(t, 1, runs[0].attempt, "River did not repeat the run")
		require.Equal(t, "scheduled", runs[1].state, "the account keeps being tried")

		ui := b.riverUI(t)
		job := ui.job(t, runs[0].id)
		require.Equal(t, "cancelled", job.State)
		require.NotEmpty(t, job.Errors)
		require.Contains(t, job.Errors[len(job.Errors)-1].Error, "[MailAuthenticationRejected]")

		// The next run tries once more, and only once.
		b.runAgain(t)
		require.Equal(t, 2, authentications(), "one authentication per run")
		require.Empty(t, b.stored(t, "INBOX"))

		for _, secret := range []string{wrong, b.user.Password()} {
			require.NotContains(t, b.logs.String(), secret)
			require.NotContains(t, b.jobText(t), secret)
		}
	})

	// A password SASLprep refuses ends the SCRAM exchange on the client's
	// side: like a wrong password, it is tried once per run and cancels the
	// run with its own identity.
	t.Run("PasswordTheMechanismCannotCarryIsTriedOncePerRunAndCancelled", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t, dovecot.WithAuthMechanisms("plain", "scram-sha-256"))
		b.env["MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS"] = "SCRAM-SHA-256"
		pwFile := strings.TrimPrefix(b.env["MAILFATHOM_ACCOUNTS_0_PASSWORD"], "file:")
		require.NoError(t, os.WriteFile(pwFile, []byte("bell\u0007"+b.user.Password()), 0o600))
		b.start(t)
		b.waitIdle(t)

		attempts := func() int { return strings.Count(b.server.Log(), "client didn't finish SASL auth") }
		require.Equal(t, 1, attempts(), "one authentication in the run")
		runs := b.jobs(t, "account_run")
		require.Len(t, runs, 2, "the failed run and the next one")
		require.Equal(t, "cancelled", runs[0].state)
		require.Equal(t, 1, runs[0].attempt, "River did not repeat the run")
		require.Equal(t, "scheduled", runs[1].state, "the account keeps being tried")
		job := b.riverUI(t).job(t, runs[0].id)
		require.Contains(t, job.Errors[len(job.Errors)-1].Error, "[MailAuthenticationExchangeRefused]")

		b.runAgain(t)
		require.Equal(t, 2, attempts(), "one authentication per run")
		require.NotContains(t, b.logs.String(), b.user.Password())
		require.NotContains(t, b.jobText(t), b.user.Password())
	})

	// Dovecot answers a wrong SCRAM proof with a plain NO, the path of
	// WrongPasswordIsTriedOncePerRunAndCancelled; a server that refuses the
	// proof inside the exchange (e=invalid-proof) can only be scripted.
	t.Run("ScramRefusalInsideTheExchangeIsTriedOncePerRunAndCancelled", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		srv := imapscript.Start(t, imapscript.ScramServerFinal("e=invalid-proof"))
		b.env["MAILFATHOM_ACCOUNTS_0_HOST"] = srv.Host()
		b.env["MAILFATHOM_ACCOUNTS_0_PORT"] = srv.PortText()
		b.env["MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY"] = "None"
		b.env["MAILFATHOM_ACCOUNTS_0_ALLOW_INSECURE_CONNECTION"] = "true"
		b.env["MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS"] = "SCRAM-SHA-256"
		delete(b.env, "MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST")
		delete(b.env, "MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY")
		b.start(t)
		b.waitIdle(t)

		require.Equal(t, 1, srv.Connections(), "one authentication in the run")
		runs := b.jobs(t, "account_run")
		require.Len(t, runs, 2, "the failed run and the next one")
		require.Equal(t, "cancelled", runs[0].state)
		require.Equal(t, 1, runs[0].attempt, "River did not repeat the run")
		job := b.riverUI(t).job(t, runs[0].id)
		require.Contains(t, job.Errors[len(job.Errors)-1].Error, "[MailAuthenticationRejected]")

		b.runAgain(t)
		require.Equal(t, 2, srv.Connections(), "one authentication per run")
	})

	t.Run("UnreachableServerOpensItsCircuitWhileAnotherAccountSyncs", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		healthy := b.server.NewUser()
		seed(t, healthy, "INBOX", 4, 21)
		// Account 0 points at a port nothing listens on.
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		deadPort := strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
		require.NoError(t, ln.Close())
		b.env["MAILFATHOM_ACCOUNTS_0_ID"] = "down"
		b.env["MAILFATHOM_ACCOUNTS_0_HOST"] = "127.0.0.1"
		b.env["MAILFATHOM_ACCOUNTS_0_PORT"] = deadPort
		b.addAccount(t, 1, "up", healthy)
		const est = "MAILFATHOM_RESILIENCE_MAILBOX_SESSION_ESTABLISHMENT_"
		b.env[est+"BASE_DELAY"] = "10ms"
		b.env[est+"MAX_DELAY"] = "50ms"
		b.env[est+"CIRCUIT_BREAKER_MINIMUM_THROUGHPUT"] = "3"
		b.start(t)
		b.waitIdle(t)

		require.Equal(t, 4, b.storedFor(t, "up", "INBOX"), "the healthy account synchronized")
		require.Equal(t, 2.0, b.gauge(t, "mailfathom_resilience_circuit_state", "MailboxSessionEstablishment", "down"), "down's circuit is open")
		require.Equal(t, 0.0, b.gauge(t, "mailfathom_resilience_circuit_state", "MailboxSessionEstablishment", "up"), "up's circuit is closed")

		var down jobRow
		for _, r := range b.jobs(t, "account_run") {
			if r.account == "down" {
				down = r
			}
		}
		require.Equal(t, "retryable", down.state, "an unavailable mailbox is attempted again later")
		ui := b.riverUI(t)
		job := ui.job(t, down.id)
		require.Equal(t, "retryable", job.State)
		require.True(t, job.ScheduledAt.After(time.Now()), "River UI shows the next attempt's time: %v", job.ScheduledAt)
		require.Contains(t, job.Errors[len(job.Errors)-1].Error, "[MailboxUnavailable]")
		require.Contains(t, b.logs.String(), "outbound circuit opened")
	})
}

type jobRow struct {
	id      int64
	state   string
	attempt int
	account string
}

// jobs returns the jobs of kind in insertion order.
func (b *syncBundle) jobs(t *testing.T, kind string) []jobRow {
	t.Helper()
	var out []jobRow
	for _, j := range dbassert.Jobs(t, b.pool, kind) {
		account, _ := j.Arg("account_id").(string)
		out = append(out, jobRow{id: j.ID, state: string(j.State), attempt: j.Attempt, account: account})
	}
	return out
}

// jobText is every job's arguments, recorded errors and metadata.
func (b *syncBundle) jobText(t *testing.T) string {
	t.Helper()
	var texts []string
	for _, j := range dbassert.Jobs(t, b.pool, "") {
		texts = append(texts, j.Text())
	}
	return strings.Join(texts, " ")
}

// gauge reads one labelled value of a gauge from the latest start's
// resilience metrics; -1 when it is absent.
func (b *syncBundle) gauge(t *testing.T, name, class, instance string) float64 {
	t.Helper()
	families, err := b.metrics.Gather()
	require.NoError(t, err)
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["class"] == class && labels["instance"] == instance {
				return m.GetGauge().GetValue()
			}
		}
	}
	return -1
}

// uiClient reads River UI's API as an operator's browser does.
type uiClient struct {
	url, user, password string
}

type uiJob struct {
	State       string    `json:"state"`
	ScheduledAt time.Time `json:"scheduled_at"`
	Errors      []struct {
		Error string `json:"error"`
	} `json:"errors"`
}

// riverUI serves River UI over the bundle's client behind its basic
// authentication.
func (b *syncBundle) riverUI(t *testing.T) *uiClient {
	t.Helper()
	const password = "ui-password"
	h, err := riverui.New(b.client, riverui.Credentials{Username: "operator", Password: func(context.Context) ([]byte, error) {
		return []byte(password), nil
	}}, slog.New(slog.DiscardHandler))
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	require.NoError(t, h.Start(ctx))
	mux := http.NewServeMux()
	h.Mount(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return &uiClient{url: srv.URL + riverui.Prefix, user: "operator", password: password}
}

func (c *uiClient) job(t *testing.T, id int64) uiJob {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, c.url+"/api/jobs/"+strconv.FormatInt(id, 10), nil)
	require.NoError(t, err)
	req.SetBasicAuth(c.user, c.password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var j uiJob
	require.NoError(t, json.NewDecoder(resp.Body).Decode(&j))
	return j
}

// addAccount configures account i, id, on user u of the bundle's server
// the way setupSync configures account 0.
func (b *syncBundle) addAccount(t *testing.T, i int, id string, u *dovecot.User) {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "password")
	require.NoError(t, os.WriteFile(pw, []byte(u.Password()), 0o600))
	p := fmt.Sprintf("MAILFATHOM_ACCOUNTS_%d_", i)
	b.env[p+"ID"] = id
	b.env[p+"HOST"] = b.server.Host()
	b.env[p+"PORT"] = strconv.Itoa(b.server.TLSPort())
	b.env[p+"USERNAME"] = u.Name()
	b.env[p+"PASSWORD"] = "file:" + pw
	b.env[p+"CERTIFICATE_TRUST"] = "AdditionalTrustedAuthority"
	b.env[p+"TRUSTED_CERTIFICATE_AUTHORITY"] = b.env["MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY"]
}

// storedFor counts the stored occurrences of account's alias.
func (b *syncBundle) storedFor(t *testing.T, account, alias string) int {
	t.Helper()
	n := 0
	for _, o := range dbassert.Occurrences(t, b.pool, strings.ToUpper(alias)) {
		if o.Account == strings.ToLower(account) {
			n++
		}
	}
	return n
}
