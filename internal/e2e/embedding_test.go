package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

const e2eEmbedDims = 64

// withEmbedding configures the bundle's serve processes with an embedding
// profile served by a test provider, and returns the provider.
func (b *testBundle) withEmbedding(t testing.TB, opts embedtest.Options) *embedtest.Server {
	t.Helper()
	opts.Dimensions = e2eEmbedDims
	srv := embedtest.Start(t, opts)
	b.env["MAILFATHOM_EMBEDDING_PROVIDER_URL"] = srv.URL
	b.env["MAILFATHOM_EMBEDDING_MODEL"] = "test-model"
	b.env["MAILFATHOM_EMBEDDING_DIMENSIONS"] = strconv.Itoa(e2eEmbedDims)
	if opts.APIKey != "" {
		keyFile := filepath.Join(b.dir, "embedding-key")
		require.NoError(t, os.WriteFile(keyFile, []byte(opts.APIKey), 0o600))
		b.env["MAILFATHOM_EMBEDDING_API_KEY"] = "file:" + keyFile
	}
	return srv
}

// awaitingVectors counts the served messages with a passage that has
// neither a vector nor a recorded refusal under model.
func (b *testBundle) awaitingVectors(t testing.TB, model string) int {
	t.Helper()
	return dbassert.MessagesAwaitingVectors(t, b.pool, model)
}

// waitEmbedded waits until no served message awaits its vectors under
// the test profile, p's log tail saying what the process did meanwhile.
func (b *testBundle) waitEmbedded(t testing.TB, p *serveProc, within time.Duration) {
	t.Helper()
	poll.Every(t, 50*time.Millisecond, within, "every served message has its vectors",
		func() bool { return b.awaitingVectors(t, "test-model") == 0 },
		func() string {
			return fmt.Sprintf("%d messages await vectors; log:\n%s", b.awaitingVectors(t, "test-model"), tailLines(p.rawLog(), 30))
		})
}

// waitEmbeddedRetrying is waitEmbedded for a provider that failed: each
// look, every every, first makes the embed jobs waiting for River's retry
// due now, as if their retry had come.
func (b *testBundle) waitEmbeddedRetrying(t testing.TB, p *serveProc, every, within time.Duration) {
	t.Helper()
	poll.Every(t, every, within, "every served message has its vectors once the provider recovered", func() bool {
		dbassert.MakeJobsDue(t, b.pool, "embed_email", rivertype.JobStateRetryable)
		return b.awaitingVectors(t, "test-model") == 0
	}, func() string {
		return fmt.Sprintf("%d messages await vectors; log:\n%s", b.awaitingVectors(t, "test-model"), tailLines(p.rawLog(), 30))
	})
}

// searchAPI asks GET /api/v1/search with basic auth and returns the status
// and body.
func searchAPI(t testing.TB, addr, user, password string, q url.Values) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, "http://"+addr+"/api/v1/search?"+q.Encode(), nil)
	require.NoError(t, err)
	req.SetBasicAuth(user, password)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(body)
}

const e2eCraneReport = "From: Harbour Master <master@example.test>\r\n" +
	"Subject: Crane inspection report\r\n" +
	"Message-ID: <crane-e2e@example.test>\r\n" +
	"Date: Tue, 03 Jun 2025 09:00:00 +0000\r\n" +
	"Content-Type: text/plain; charset=utf-8\r\n\r\n" +
	"The inspectors examined both harbour cranes and found the winches worn.\r\n"

// TestEmbeddingEndToEnd runs serve with an embedding profile: a
// synchronized folder is embedded by the jobs and found by meaning through
// the command line and the API, and a provider outage during a first
// synchronization changes none of its figures.
func TestEmbeddingEndToEnd(t *testing.T) {
	t.Parallel()

	t.Run("ASynchronizedFolderIsFoundByMeaning", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgtest.Database(t))
		u := b.server.NewUser()
		seedCorpus(t, u, "INBOX", 30, 41, 8)
		u.Append("INBOX", []byte(e2eCraneReport), time.Now())
		b.addAccount(t, "primary", u)
		provider := b.withEmbedding(t, embedtest.Options{})
		uiPw := filepath.Join(b.dir, "ui-password")
		require.NoError(t, os.WriteFile(uiPw, []byte("ui-password-e2e"), 0o600))
		b.env["MAILFATHOM_UI_ENABLED"] = "true"
		b.env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPw

		p := b.start(t, "serve")
		b.waitStored(t, 31, time.Minute)
		b.waitEmbedded(t, p, time.Minute)
		require.Positive(t, provider.Inputs())

		// "inspecting cranes" shares no whole word with the report.
		code, body := searchAPI(t, p.addr(t), "admin", "ui-password-e2e", url.Values{"q": {"inspecting cranes"}, "mode": {"lexical"}})
		require.Equal(t, http.StatusOK, code, body)
		require.Contains(t, body, `"hits":[]`)
		for _, mode := range []string{"semantic", "hybrid", ""} {
			code, body = searchAPI(t, p.addr(t), "admin", "ui-password-e2e", url.Values{"q": {"inspecting cranes"}, "mode": {mode}})
			require.Equal(t, http.StatusOK, code, body)
			var answer struct {
				Mode string `json:"mode"`
				Hits []struct {
					Subject string `json:"subject"`
					Account string `json:"account"`
					Alias   string `json:"alias"`
					Passage *int   `json:"best_passage"`
				} `json:"hits"`
			}
			require.NoError(t, json.Unmarshal([]byte(body), &answer))
			require.NotEmpty(t, answer.Hits, mode)
			require.Equal(t, "Crane inspection report", answer.Hits[0].Subject, mode)
			require.Equal(t, "primary", answer.Hits[0].Account)
			require.NotNil(t, answer.Hits[0].Passage)
			if mode == "" {
				require.Equal(t, "hybrid", answer.Mode, "hybrid is the default with a profile")
			}
		}

		cmd := exec.Command(binary(t), "search", "-mode", "semantic", "inspecting", "cranes")
		cmd.Env = fromEnv(b.env)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		require.Contains(t, string(out), "Crane inspection report")
		p.stop(t)
	})

	t.Run("AProviderOutageLeavesTheSynchronizationAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgtest.Database(t))
		u := b.server.NewUser()
		seedCorpus(t, u, "INBOX", 40, 42, 8)
		b.addAccount(t, "primary", u)
		provider := b.withEmbedding(t, embedtest.Options{})
		provider.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
		b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_BASE_DELAY"] = "10ms"
		b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_DELAY"] = "50ms"
		b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_CIRCUIT_BREAKER_BREAK_DURATION"] = "500ms"
		b.env["MAILFATHOM_BACKFILL_INTERVAL"] = "2s"

		p := b.start(t, "serve")
		b.waitStored(t, 40, time.Minute)
		p.waitLog(t, "folder pass finished", time.Minute)
		poll.Until(t, time.Minute, "the embed jobs call the provider", func() (bool, string) {
			n := provider.Requests()
			return n > 0, fmt.Sprintf("%d requests", n)
		})
		require.Equal(t, 40, b.awaitingVectors(t, "test-model"), "nothing embedded while the provider fails")
		var lastSeen int64
		for _, o := range dbassert.Occurrences(t, b.pool, "") {
			lastSeen = max(lastSeen, int64(o.UID))
		}
		_, checkpoint := b.checkpoint(t, "INBOX")
		require.Equal(t, lastSeen, checkpoint, "the checkpoint moved past everything stored")

		// The provider recovers: River's next attempts, or the embedding
		// backfill the failures scheduled, embed everything.
		provider.SetFault(embedtest.Fault{})
		b.waitEmbeddedRetrying(t, p, 2*time.Second, 2*time.Minute)
		p.stop(t)
	})
}

// TestFirstSyncThroughAProviderOutage synchronizes 2 000 messages for the
// first time while the embedding provider answers every request with 500:
// the embed jobs queued or retrying never exceed MAILFATHOM_EMBEDDING_MAX_BACKLOG,
// `mailfathom search` answers during the outage and says it ranked by
// words alone, and once the provider recovers every message gets its
// vectors with nobody touching the process or its queue.
func TestFirstSyncThroughAProviderOutage(t *testing.T) {
	t.Parallel()
	b := setup(t, pgtest.Database(t))
	u := b.server.NewUser()
	seedCorpus(t, u, "INBOX", 2000, 44, 16)
	u.Append("INBOX", []byte(e2eCraneReport), time.Now())
	b.addAccount(t, "primary", u)
	provider := b.withEmbedding(t, embedtest.Options{})
	provider.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
	const maxBacklog = 20
	b.env["MAILFATHOM_EMBEDDING_MAX_BACKLOG"] = strconv.Itoa(maxBacklog)
	b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_BASE_DELAY"] = "10ms"
	b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_DELAY"] = "50ms"
	b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_CIRCUIT_BREAKER_BREAK_DURATION"] = "1s"
	b.env["MAILFATHOM_BACKFILL_INTERVAL"] = "5s"

	p := b.start(t, "serve")
	outstanding := func() int {
		return dbassert.JobCount(t, b.pool, "embed_email", rivertype.JobStateAvailable, rivertype.JobStatePending,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled, rivertype.JobStateRunning)
	}
	most := 0
	// Asked at poll's pace: each look also samples the backlog.
	poll.Until(t, 3*time.Minute, "2 001 messages stored", func() (bool, string) {
		now := outstanding()
		most = max(most, now)
		n := b.storedCount(t)
		return n == 2001, fmt.Sprintf("%d stored, %d embed jobs outstanding", n, now)
	})
	p.waitLog(t, "folder pass finished", time.Minute)
	require.Positive(t, provider.Requests(), "embed jobs did call the failing provider")
	require.Equal(t, 2001, b.awaitingVectors(t, "test-model"), "nothing embedded while the provider fails")
	most = max(most, outstanding())
	t.Logf("2 001 messages stored with the provider failing; at most %d embed jobs outstanding (bound %d)", most, maxBacklog)
	require.LessOrEqual(t, most, maxBacklog, "the backlog bound held through the outage")

	// The CLI's hybrid search answers by words and says so.
	cmd := exec.Command(binary(t), "search", "crane", "inspection")
	cmd.Env = fromEnv(b.env)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	require.NoError(t, cmd.Run(), "stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
	require.Contains(t, stdout.String(), "Crane inspection report")
	require.Contains(t, stderr.String(), "ranked by words alone, not by meaning")

	// The provider recovers: the retries and the backfill's walks embed
	// everything, the backlog bound still holding.
	provider.SetFault(embedtest.Fault{})
	start := time.Now()
	poll.Every(t, time.Second, 5*time.Minute, "every message embedded after the provider recovered", func() bool {
		most = max(most, outstanding())
		return b.awaitingVectors(t, "test-model") == 0
	}, func() string {
		return fmt.Sprintf("%d messages await vectors, %d embed jobs outstanding; log:\n%s",
			b.awaitingVectors(t, "test-model"), outstanding(), tailLines(p.rawLog(), 30))
	})
	t.Logf("every message embedded %v after the provider recovered", time.Since(start).Round(time.Second))
	require.LessOrEqual(t, most, maxBacklog)
	p.stop(t)
}

// TestFirstSyncWithTheProviderHanging synchronizes 2 000 messages for the
// first time while the embedding provider never answers: the passes offer
// what they store, the embed jobs hang on the provider, and the sync
// completes with every message stored as it does without a profile.
// BenchmarkFirstSync with MAILFATHOM_BENCH_EMBEDDING=hang measures what it
// costs.
func TestFirstSyncWithTheProviderHanging(t *testing.T) {
	t.Parallel()
	b := setup(t, pgtest.Database(t))
	u := b.server.NewUser()
	c := seedCorpus(t, u, "INBOX", 2000, 43, 16)
	b.addAccount(t, "primary", u)
	provider := b.withEmbedding(t, embedtest.Options{})
	provider.SetFault(embedtest.Fault{Kind: embedtest.Hang})
	b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_ATTEMPT_TIMEOUT"] = "1s"
	b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_TOTAL_TIMEOUT"] = "3s"
	b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_DELAY"] = "1s"
	b.env["MAILFATHOM_EMBEDDING_MAX_BACKLOG"] = "20"

	start := time.Now()
	p := b.start(t, "serve")
	b.waitStored(t, 2000, 3*time.Minute)
	t.Logf("2 000 messages stored in %v with the provider hanging", time.Since(start).Round(time.Millisecond))
	b.requireStored(t, "primary", "INBOX", u, c)
	require.Equal(t, 2000, b.awaitingVectors(t, "test-model"), "nothing was embedded")
	require.Positive(t, provider.Requests(), "embed jobs did call the hanging provider")
	require.Positive(t, dbassert.JobCount(t, b.pool, "embed_email"), "the passes offered what they stored")
	p.stop(t)
}

// TestEmbeddingLosesNothing shows at process level that whatever the
// passes could not offer is embedded later: offers a full backlog refused
// are completed by the embedding backfill, and mail stored while no
// profile was configured is embedded once the profile is back, without
// embedding again what was embedded before.
func TestEmbeddingLosesNothing(t *testing.T) {
	t.Parallel()

	t.Run("RefusedOffersAreCompletedByTheBackfill", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgtest.Database(t))
		u := b.server.NewUser()
		seedCorpus(t, u, "INBOX", 60, 44, 16)
		b.addAccount(t, "primary", u)
		provider := b.withEmbedding(t, embedtest.Options{})
		// The two workers hang on the provider, so one more job fills the
		// backlog and the rest of the passes' offers are refused.
		provider.SetFault(embedtest.Fault{Kind: embedtest.Hang})
		b.env["MAILFATHOM_EMBEDDING_MAX_BACKLOG"] = "1"
		b.env["MAILFATHOM_EMBEDDING_BATCH_SIZE"] = "10"
		b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "10"
		b.env["MAILFATHOM_BACKFILL_INTERVAL"] = "1s"
		b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_ATTEMPT_TIMEOUT"] = "2s"
		b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_TOTAL_TIMEOUT"] = "4s"
		b.env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_MAX_DELAY"] = "1s"

		p := b.start(t, "serve")
		b.waitStored(t, 60, time.Minute)
		p.waitLog(t, "folder pass finished", time.Minute)
		offered := 0
		for _, j := range dbassert.Jobs(t, b.pool, "embed_email") {
			ids, _ := j.Arg("email_ids").([]any)
			offered += len(ids)
		}
		require.Less(t, offered, 60, "the full backlog refused some offers")

		provider.SetFault(embedtest.Fault{})
		b.waitEmbeddedRetrying(t, p, time.Second, 2*time.Minute)
		p.stop(t)
	})

	t.Run("RemovingTheProfileAndAddingItBack", func(t *testing.T) {
		t.Parallel()
		b := setup(t, pgtest.Database(t))
		u := b.server.NewUser()
		seedCorpus(t, u, "INBOX", 20, 45, 16)
		b.addAccount(t, "primary", u)
		provider := b.withEmbedding(t, embedtest.Options{})
		p := b.start(t, "serve-with")
		b.waitStored(t, 20, time.Minute)
		b.waitEmbedded(t, p, time.Minute)
		p.stop(t)
		embedded := provider.Inputs()

		profile := map[string]string{}
		for _, k := range []string{"MAILFATHOM_EMBEDDING_PROVIDER_URL", "MAILFATHOM_EMBEDDING_MODEL", "MAILFATHOM_EMBEDDING_DIMENSIONS"} {
			profile[k] = b.env[k]
			delete(b.env, k)
		}
		seedCorpus(t, u, "INBOX", 10, 46, 16)
		dbassert.MakeJobsDue(t, b.pool, "account_run", rivertype.JobStateScheduled)
		p = b.start(t, "serve-without")
		b.waitStored(t, 30, time.Minute)
		p.stop(t)
		require.Equal(t, 10, b.awaitingVectors(t, "test-model"), "nothing is embedded without a profile")

		for k, v := range profile {
			b.env[k] = v
		}
		p = b.start(t, "serve-again")
		b.waitEmbedded(t, p, time.Minute)
		p.stop(t)
		require.Less(t, provider.Inputs()-embedded, embedded, "only the new mail is embedded")
	})
}
