package status_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestOutstandingWork: the status view reports, per account and folder
// alias, the mailbox mutations that are not completed and the messages
// awaiting vectors, and its figures are the ones /metrics carries — per
// folder from the status collector, and in total from the mutation and
// embedding collectors.
func TestOutstandingWork(t *testing.T) {
	t.Parallel()
	const dims = 8

	type testBundle struct {
		ctx    context.Context
		pool   *pgxpool.Pool
		emails []uuid.UUID
	}
	// setup stores three messages with passages in primary's inbox and
	// none for other.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		b := &testBundle{ctx: ctx, pool: pool}
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			inbox, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, config.DefaultFolderAlias, "INBOX", "/")
			if err != nil {
				return err
			}
			for i, subject := range []string{"Harbour crane", "Lunch", "Budget"} {
				raw := []byte("Subject: " + subject + "\r\nContent-Type: text/plain\r\n\r\nBody " + subject + "\r\n")
				rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
				id, err := searchindex.WriteOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID,
					UIDValidity: 1, UID: uint32(i + 1), Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw}, &rec)
				if err != nil {
					return err
				}
				b.emails = append(b.emails, id)
			}
			return nil
		}))
		return b
	}
	load := func(t *testing.T, extra ...string) *config.Config {
		t.Helper()
		env := []string{"MAILFATHOM_SYNC_ENABLED=false"}
		for i, id := range []string{"primary", "other"} {
			p := fmt.Sprintf("MAILFATHOM_ACCOUNTS_%d_", i)
			env = append(env, p+"ID="+id, p+"HOST=imap.example.test", p+"USERNAME=user", p+"PASSWORD=env:UNUSED")
		}
		cfg, err := config.Load(append(env, extra...))
		require.NoError(t, err)
		return cfg
	}
	// get answers path of the status handler over HTTP.
	get := func(t *testing.T, b *testBundle, cfg *config.Config, path string) []byte {
		t.Helper()
		h := status.NewHandler(b.pool, status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }}, slog.New(slog.DiscardHandler))
		mux := http.NewServeMux()
		h.Mount(mux, func(h http.Handler) http.Handler { return h })
		srv := httptest.NewServer(mux)
		defer srv.Close()
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		return body
	}
	read := func(t *testing.T, b *testBundle, cfg *config.Config) (status.Report, map[string]float64) {
		t.Helper()
		opts := status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }}
		rep, err := status.Read(b.ctx, b.pool, opts)
		require.NoError(t, err)
		reg := prometheus.NewPedanticRegistry()
		require.NoError(t, reg.Register(status.NewCollector(b.pool, opts)))
		require.NoError(t, reg.Register(mutation.NewCollector(b.pool, cfg)))
		if cfg.Embedding.Configured() {
			require.NoError(t, reg.Register(embedding.NewCollector(b.pool)))
		}
		families, err := reg.Gather()
		require.NoError(t, err)
		metrics := map[string]float64{}
		for _, f := range families {
			for _, m := range f.GetMetric() {
				var labels []string
				for _, l := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
				}
				metrics[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
		return rep, metrics
	}
	// inStep requires that every outstanding-work figure of rep is the
	// one metrics carries.
	inStep := func(t *testing.T, rep status.Report, metrics map[string]float64) {
		t.Helper()
		for _, a := range rep.Accounts {
			for _, f := range a.Folders {
				for _, state := range status.MutationStates {
					key := fmt.Sprintf("mailfathom_folder_mailbox_mutations_outstanding{account=%q,alias=%q,state=%q}", a.ID, f.Alias, state)
					require.Contains(t, metrics, key)
					require.Equal(t, float64(f.Mutations.ByState(state)), metrics[key], key)
				}
				key := fmt.Sprintf("mailfathom_folder_messages_awaiting_vectors{account=%q,alias=%q}", a.ID, f.Alias)
				refused := fmt.Sprintf("mailfathom_folder_passages_refused{account=%q,alias=%q}", a.ID, f.Alias)
				if f.AwaitingVectors == nil {
					require.NotContains(t, metrics, key)
					require.NotContains(t, metrics, refused)
					continue
				}
				require.Equal(t, float64(*f.AwaitingVectors), metrics[key], key)
				require.Contains(t, metrics, refused)
				require.Equal(t, float64(*f.RefusedPassages), metrics[refused], refused)
			}
			// The mutation collector's figures, summed over kinds, are
			// the account's own.
			for _, state := range status.MutationStates {
				var sum float64
				for name, v := range metrics {
					if strings.HasPrefix(name, "mailfathom_mailbox_mutations_outstanding{") &&
						strings.Contains(name, fmt.Sprintf("account=%q,", a.ID)) && strings.Contains(name, fmt.Sprintf("state=%q", state)) {
						sum += v
					}
				}
				require.Equal(t, float64(a.Mutations.ByState(state)), sum, "%s %s", a.ID, state)
			}
		}
		e := rep.Embedding
		if e == nil {
			require.NotContains(t, metrics, "mailfathom_embedding_backlog_jobs{}")
			return
		}
		require.Equal(t, float64(e.BacklogJobs), metrics["mailfathom_embedding_backlog_jobs{}"])
		if e.ProfileID != 0 {
			key := fmt.Sprintf("mailfathom_embedding_messages_awaiting_vectors{dimensions=%q,model=%q,profile=%q}",
				strconv.Itoa(e.Dimensions), e.Model, strconv.Itoa(int(e.ProfileID)))
			require.Contains(t, metrics, key)
			require.Equal(t, float64(e.AwaitingMessages), metrics[key])
			key = fmt.Sprintf("mailfathom_embedding_passages_refused{dimensions=%q,model=%q,profile=%q}",
				strconv.Itoa(e.Dimensions), e.Model, strconv.Itoa(int(e.ProfileID)))
			require.Contains(t, metrics, key)
			require.Equal(t, float64(e.RefusedPassages), metrics[key])
		}
	}
	account := func(t *testing.T, rep status.Report, id string) status.Account {
		t.Helper()
		for _, a := range rep.Accounts {
			if a.ID == id {
				return a
			}
		}
		t.Fatalf("no account %s", id)
		return status.Account{}
	}

	t.Run("MutationsByState", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		now := time.Now()
		record := func(email uuid.UUID, kind mailstore.MutationKind, request string) uuid.UUID {
			m, _, err := mailstore.RecordMutation(b.ctx, b.pool, mailstore.MutationRequest{EmailID: email, Kind: kind, RequestID: request}, now)
			require.NoError(t, err)
			return m.ID
		}
		record(b.emails[0], mailstore.MutationMarkRead, "pending")
		stuck := record(b.emails[1], mailstore.MutationMarkUnread, "stuck")
		require.NoError(t, mailstore.FailMutation(b.ctx, b.pool, stuck, mutation.CodeMailboxUnavailable, now.Add(time.Second)))
		dead := record(b.emails[1], mailstore.MutationDelete, "dead")
		require.NoError(t, mailstore.FinishMutation(b.ctx, b.pool, dead, mailstore.MutationDeadLettered, mutation.CodeNoSafeWay, now.Add(2*time.Second)))
		done := record(b.emails[2], mailstore.MutationMarkRead, "done")
		require.NoError(t, mailstore.FinishMutation(b.ctx, b.pool, done, mailstore.MutationCompleted, "", now.Add(3*time.Second)))
		// A copy the server carried without naming the placement: completed,
		// unjoined.
		require.NoError(t, pgx.BeginFunc(b.ctx, b.pool, func(tx pgx.Tx) error {
			e, _, err := mailstore.ReadMutableEmail(b.ctx, tx, b.emails[2])
			if err != nil {
				return err
			}
			archive, _, _, err := mailstore.CommitBinding(b.ctx, tx, e.AccountID, "ARCHIVE", "Archive", "/")
			if err != nil {
				return err
			}
			m, _, err := mailstore.RecordMutation(b.ctx, tx, mailstore.MutationRequest{EmailID: b.emails[2], Kind: mailstore.MutationCopy,
				DestinationFolderID: archive.ID, RequestID: "unjoined"}, now)
			if err != nil {
				return err
			}
			if err := mailstore.AdvanceMutation(b.ctx, tx, m.ID, mailstore.StageRecorded, mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued}, now); err != nil {
				return err
			}
			return mailstore.AdvanceMutation(b.ctx, tx, m.ID, mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: mailstore.StageCompleted}, now)
		}))

		rep, metrics := read(t, b, load(t))
		primary := account(t, rep, "primary")
		want := status.Mutations{Pending: 2, DeadLettered: 1, CompletedUnjoined: 1}
		require.Equal(t, want, primary.Mutations, "a completed change is not outstanding; an unjoined placement is counted")
		require.Equal(t, want, primary.Folders[0].Mutations)
		require.NotNil(t, primary.LastFailedMutation)
		require.Equal(t, dead.String(), primary.LastFailedMutation.ID, "the latest failure")
		require.Equal(t, mutation.CodeNoSafeWay, primary.LastFailedMutation.FailureCode)
		require.Equal(t, string(mailstore.MutationDeadLettered), primary.LastFailedMutation.State)
		other := account(t, rep, "other")
		require.Zero(t, other.Mutations)
		require.Nil(t, other.LastFailedMutation)
		require.Nil(t, rep.Embedding, "no profile is configured")
		require.Nil(t, primary.AwaitingVectors)
		inStep(t, rep, metrics)

		// The page shows them too.
		page := get(t, b, load(t), "/status")
		require.Contains(t, string(page), "code "+mutation.CodeNoSafeWay)
		require.Contains(t, string(page), "1 move(s) or copy(ies) completed, unjoined")
		var api status.Report
		require.NoError(t, json.Unmarshal(get(t, b, load(t), "/api/v1/status"), &api))
		require.EqualValues(t, 1, account(t, api, "primary").Mutations.CompletedUnjoined)
		require.Contains(t, string(page), "Embedding: no profile configured.")
	})

	t.Run("EmbeddingBacklog", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		cfg := load(t, "MAILFATHOM_EMBEDDING_PROVIDER_URL=http://127.0.0.1:1",
			"MAILFATHOM_EMBEDDING_MODEL=test-model", "MAILFATHOM_EMBEDDING_DIMENSIONS="+strconv.Itoa(dims))

		// Before anything was embedded the profile is not recorded, and
		// reading the status does not record it: every message awaits.
		rep, metrics := read(t, b, cfg)
		require.NotNil(t, rep.Embedding)
		require.Zero(t, rep.Embedding.ProfileID)
		require.EqualValues(t, 3, rep.Embedding.AwaitingMessages)
		primary := account(t, rep, "primary")
		require.EqualValues(t, 3, *primary.AwaitingVectors)
		require.EqualValues(t, 3, *primary.Folders[0].AwaitingVectors)
		require.EqualValues(t, 0, *account(t, rep, "other").AwaitingVectors)
		inStep(t, rep, metrics)
		_, recorded, err := searchindex.FindProfile(b.ctx, b.pool, "test-model", dims)
		require.NoError(t, err)
		require.False(t, recorded)

		// One message embedded, two embed jobs waiting.
		profile, err := searchindex.EnsureProfile(b.ctx, b.pool, "test-model", dims)
		require.NoError(t, err)
		pending, err := searchindex.PassagesAwaitingVectors(b.ctx, b.pool, profile, b.emails[:1])
		require.NoError(t, err)
		var vs []searchindex.PassageVector
		for _, p := range pending {
			vs = append(vs, searchindex.PassageVector{Passage: p, Vector: embedtest.Embed(p.Text, dims)})
		}
		_, err = searchindex.WriteVectors(b.ctx, b.pool, profile, vs)
		require.NoError(t, err)
		client, err := jobqueue.NewInsertClient(b.pool)
		require.NoError(t, err)
		for _, id := range b.emails[1:] {
			_, err := client.Insert(b.ctx, jobs.EmbedEmail{EmailIDs: []uuid.UUID{id}}, nil)
			require.NoError(t, err)
		}

		rep, metrics = read(t, b, cfg)
		require.Equal(t, &status.Embedding{Model: "test-model", Dimensions: dims, ProfileID: profile, BacklogJobs: 2, AwaitingMessages: 2}, rep.Embedding)

		primary = account(t, rep, "primary")
		require.EqualValues(t, 2, *primary.AwaitingVectors)
		require.EqualValues(t, 2, *primary.Folders[0].AwaitingVectors)
		require.EqualValues(t, 0, *primary.RefusedPassages)
		inStep(t, rep, metrics)

		// Once an answer named its model, the profile shows it.
		_, err = searchindex.RecordAnsweredModel(b.ctx, b.pool, profile, "served-model")
		require.NoError(t, err)
		rep, _ = read(t, b, cfg)
		require.Equal(t, &status.Embedding{Model: "test-model", Dimensions: dims, ProfileID: profile, AnsweredModel: "served-model",
			BacklogJobs: 2, AwaitingMessages: 2}, rep.Embedding)
		require.Contains(t, string(get(t, b, cfg, "/status")), "Embedding test-model (8 dimensions; vectors of model served-model, as the provider answered)")
		// The provider refused both passages of the second message: it no
		// longer awaits, and its passages count as refused.
		pending, err = searchindex.PassagesAwaitingVectors(b.ctx, b.pool, profile, b.emails[1:2])
		require.NoError(t, err)
		require.Len(t, pending, 2)
		var rs []searchindex.PassageRefusal
		for _, p := range pending {
			rs = append(rs, searchindex.PassageRefusal{Passage: p, Status: 413})
		}
		_, err = searchindex.RecordRefusals(b.ctx, b.pool, profile, rs)
		require.NoError(t, err)
		rep, metrics = read(t, b, cfg)
		require.Equal(t, &status.Embedding{Model: "test-model", Dimensions: dims, ProfileID: profile, AnsweredModel: "served-model",
			BacklogJobs: 2, AwaitingMessages: 1, RefusedPassages: 2}, rep.Embedding)
		primary = account(t, rep, "primary")
		require.EqualValues(t, 1, *primary.AwaitingVectors)
		require.EqualValues(t, 2, *primary.RefusedPassages)
		require.EqualValues(t, 2, *primary.Folders[0].RefusedPassages)
		require.EqualValues(t, 0, *account(t, rep, "other").RefusedPassages)
		inStep(t, rep, metrics)

		// The page and the JSON show them too.
		served(t, b.pool, status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }}, map[string]string{
			"/status":        "2 passage(s) refused by the provider",
			"/api/v1/status": `"refused_passages": 2`,
		})
	})
}

// served requires that what the handler serves at each path contains
// the text given for it.
func served(t *testing.T, q status.Querier, opts status.Options, want map[string]string) {
	t.Helper()
	h := status.NewHandler(q, opts, slog.New(slog.DiscardHandler))
	mux := http.NewServeMux()
	h.Mount(mux, func(h http.Handler) http.Handler { return h })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for path, text := range want {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		require.Contains(t, string(body), text, path)
	}
}

// TestUnresolvedAliasIsNotWatched: an alias the account's latest run
// resolved to no folder shows Polling and why, in the report, the JSON of
// /api/v1/status and the page, even when a watch had recorded it as
// watched before; the folder the run resolved keeps its mode.
func TestUnresolvedAliasIsNotWatched(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	cfg, err := config.Load([]string{"MAILFATHOM_SYNC_ENABLED=true",
		"MAILFATHOM_ACCOUNTS_0_ID=primary", "MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test", "MAILFATHOM_ACCOUNTS_0_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=env:UNUSED", "MAILFATHOM_ACCOUNTS_0_MODE=Push",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS=lists", "MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH=Lists",
		"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS=inbox", "MAILFATHOM_ACCOUNTS_0_FOLDERS_1_SPECIAL_USE=Inbox"})
	require.NoError(t, err)
	key := config.AccountKey("primary")
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		id, err := mailstore.EnsureAccount(ctx, tx, key)
		if err != nil {
			return err
		}
		inbox, _, _, err := mailstore.CommitBinding(ctx, tx, id, "INBOX", "INBOX", "/")
		if err != nil {
			return err
		}
		if _, _, _, err := mailstore.CommitBinding(ctx, tx, id, "LISTS", "Lists", "/"); err != nil {
			return err
		}
		for _, alias := range []string{"LISTS", "INBOX"} {
			if _, err := mailstore.SetEffectiveMode(ctx, tx, key, alias, mailstore.ModePush); err != nil {
				return err
			}
		}
		_, err = mailstore.RecordResolutions(ctx, tx, key, []mailstore.Resolution{
			{Alias: "LISTS", Failure: "FolderAliasUnresolved"}, {Alias: "INBOX", BindingID: inbox.ID}})
		return err
	}))
	opts := status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }}
	rep, err := status.Read(ctx, pool, opts)
	require.NoError(t, err)
	require.Len(t, rep.Accounts, 1)
	folders := rep.Accounts[0].Folders
	require.Len(t, folders, 2)
	require.Equal(t, "LISTS", folders[0].Alias)
	require.Equal(t, "Polling", folders[0].EffectiveMode, "nothing watches an unresolved alias")
	require.Equal(t, "FolderAliasUnresolved", folders[0].Unresolved)
	require.Equal(t, "INBOX", folders[1].Alias)
	require.Equal(t, "Push", folders[1].EffectiveMode)
	require.Empty(t, folders[1].Unresolved)

	served(t, pool, opts, map[string]string{
		"/api/v1/status": `"unresolved": "FolderAliasUnresolved"`,
		"/status":        "(unresolved: FolderAliasUnresolved)",
	})
}

// TestThrottledAccountAndDownloadBudget: an account its server throttles
// shows until when and why, everywhere the status is read — the report,
// /api/v1/status, the /status page — and is no failed account; the
// throttles are counted per account and reason on /metrics; an account
// with a download budget shows what the window holds and when it
// continues; a throttle that ended is no longer shown.
func TestThrottledAccountAndDownloadBudget(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	cfg, err := config.Load([]string{"MAILFATHOM_SYNC_ENABLED=false",
		"MAILFATHOM_ACCOUNTS_0_ID=gmail", "MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test", "MAILFATHOM_ACCOUNTS_0_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_0_PASSWORD=env:UNUSED", "MAILFATHOM_ACCOUNTS_0_MAX_DOWNLOAD_BYTES_PER_DAY=2500000000",
		"MAILFATHOM_ACCOUNTS_1_ID=calm", "MAILFATHOM_ACCOUNTS_1_HOST=imap.example.test", "MAILFATHOM_ACCOUNTS_1_USERNAME=user",
		"MAILFATHOM_ACCOUNTS_1_PASSWORD=env:UNUSED"})
	require.NoError(t, err)
	now := time.Now().UTC().Truncate(time.Second)
	until := now.Add(90 * time.Minute)
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		for _, step := range []struct {
			reason    string
			suggested time.Duration
		}{{"BandwidthExceeded", 0}, {"BandwidthExceeded", 0}, {"RequestThrottled", 5 * time.Second}} {
			if _, err := mailstore.RecordThrottle(ctx, tx, "gmail", step.reason, step.suggested, now,
				func(int) time.Duration { return until.Sub(now) }); err != nil {
				return err
			}
		}
		// One that ended long ago.
		if _, err := mailstore.RecordThrottle(ctx, tx, "calm", "Unavailable", 0, now.Add(-2*time.Hour),
			func(int) time.Duration { return time.Minute }); err != nil {
			return err
		}
		claim, _, err := mailstore.ClaimDownload(ctx, tx, "gmail", 2_500_000_000, 2_500_000_000, now)
		if err != nil {
			return err
		}
		_, _, err = mailstore.SettleDownload(ctx, tx, "gmail", claim, 2_499_000_000, 2_000_000, 2_500_000_000, now)
		return err
	}))

	opts := status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }, Now: func() time.Time { return now }}
	rep, err := status.Read(ctx, pool, opts)
	require.NoError(t, err)
	require.Len(t, rep.Accounts, 2)
	gmail, calm := rep.Accounts[0], rep.Accounts[1]
	require.NotNil(t, gmail.Throttled)
	require.True(t, gmail.Throttled.Until.Equal(until))
	require.Equal(t, "RequestThrottled", gmail.Throttled.Reason)
	require.NotNil(t, gmail.Throttled.SuggestedDelaySeconds)
	require.Equal(t, 5.0, *gmail.Throttled.SuggestedDelaySeconds)
	require.Equal(t, 3, gmail.Throttled.InARow)
	require.Zero(t, gmail.ConsecutiveFailures, "a throttle is no failure")
	require.Nil(t, gmail.LastFailure)
	require.Equal(t, map[string]int64{"BandwidthExceeded": 2, "RequestThrottled": 1}, gmail.Throttles)
	require.Nil(t, calm.Throttled, "a throttle that ended is not shown")
	require.Equal(t, map[string]int64{"Unavailable": 1}, calm.Throttles)

	require.NotNil(t, gmail.DownloadBudget)
	require.EqualValues(t, 2_500_000_000, gmail.DownloadBudget.BytesPerDay)
	require.EqualValues(t, 2_499_000_000, gmail.DownloadBudget.UsedBytes)
	require.Equal(t, 24, gmail.DownloadBudget.WindowHours)
	require.NotNil(t, gmail.DownloadBudget.ContinuesAt)
	require.True(t, gmail.DownloadBudget.ContinuesAt.After(now.Add(24*time.Hour-time.Second)), "%v", gmail.DownloadBudget.ContinuesAt)
	require.Nil(t, calm.DownloadBudget, "no budget configured")

	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(status.NewCollector(pool, opts)))
	families, err := reg.Gather()
	require.NoError(t, err)
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			got[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
		}
	}
	require.Equal(t, 2.0, got["mailfathom_account_throttled_total{account=gmail,reason=BandwidthExceeded}"])
	require.Equal(t, 1.0, got["mailfathom_account_throttled_total{account=gmail,reason=RequestThrottled}"])
	require.Equal(t, 1.0, got["mailfathom_account_throttled_total{account=calm,reason=Unavailable}"])
	require.InDelta(t, 5400.0, got["mailfathom_account_throttled_seconds{account=gmail}"], 1)
	require.Equal(t, 0.0, got["mailfathom_account_throttled_seconds{account=calm}"])
	require.Equal(t, 2_499_000_000.0, got["mailfathom_account_download_window_bytes{account=gmail}"])

	h := status.NewHandler(pool, opts, slog.New(slog.DiscardHandler))
	mux := http.NewServeMux()
	h.Mount(mux, func(h http.Handler) http.Handler { return h })
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	for path, wants := range map[string][]string{
		"/api/v1/status": {`"throttled": {`, `"reason": "RequestThrottled"`, `"download_budget": {`, `"continues_at"`},
		"/status":        {"Throttled by the server until " + until.Local().Format("2006-01-02 15:04:05"), "(RequestThrottled, suggested wait 5s)", "Download budget: 2.5 GB of 2.5 GB used in the last 24 h; <span class=\"bad\">reached, continues at"},
	} {
		resp, err := http.Get(srv.URL + path)
		require.NoError(t, err)
		body, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		require.NoError(t, resp.Body.Close())
		for _, want := range wants {
			require.Contains(t, string(body), want, path)
		}
	}
}
