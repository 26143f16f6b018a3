package mutation_test

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestHandler(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool  *pgxpool.Pool
		srv   *httptest.Server
		email uuid.UUID
	}
	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		cfg, err := config.Load([]string{
			"MAILFATHOM_ACCOUNTS_0_ID=primary",
			"MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
			"MAILFATHOM_ACCOUNTS_0_USERNAME=user",
			"MAILFATHOM_ACCOUNTS_0_PASSWORD=env:UNUSED",
			"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS=inbox",
			"MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH=INBOX",
			"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS=archive",
			"MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH=Archive",
			"MAILFATHOM_ACCOUNTS_0_FOLDERS_2_ALIAS=later",
			"MAILFATHOM_ACCOUNTS_0_FOLDERS_2_REMOTE_PATH=Later",
		})
		require.NoError(t, err)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		var inbox mailstore.Binding
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			inbox, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
			if err != nil {
				return err
			}
			_, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "ARCHIVE", "Archive", "/")
			return err
		}))
		email, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID, UIDValidity: 1, UID: 7,
			Size: 1, Raw: []byte("x"), Availability: mailstore.Available})
		require.NoError(t, err)
		client, err := jobqueue.NewInsertClient(pool)
		require.NoError(t, err)
		mux := http.NewServeMux()
		mutation.NewHandler(pool, cfg, client, nil).Mount(mux, func(h http.Handler) http.Handler { return h })
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return ctx, &testBundle{pool: pool, srv: srv, email: email}
	}
	// send posts body and returns the status and the decoded answer; it
	// fails no test, so a caller off the test's goroutine may use it.
	send := func(b *testBundle, body string) (int, map[string]any, error) {
		resp, err := http.Post(b.srv.URL+"/api/v1/mutations", "application/json", bytes.NewBufferString(body))
		if err != nil {
			return 0, nil, err
		}
		defer resp.Body.Close()
		var out map[string]any
		err = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out, err
	}
	post := func(t *testing.T, b *testBundle, body string) (int, map[string]any) {
		t.Helper()
		code, out, err := send(b, body)
		require.NoError(t, err)
		return code, out
	}
	count := func(ctx context.Context, t *testing.T, b *testBundle) int {
		t.Helper()
		recorded, err := mailstore.ListMutations(ctx, b.pool, mailstore.MutationFilter{})
		require.NoError(t, err)
		return len(recorded)
	}

	t.Run("CreatedThenTheSameRequestThenAConflict", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		body := `{"email_id":"` + b.email.String() + `","kind":"move","destination_alias":"archive","request_id":"r-1"}`
		code, created := post(t, b, body)
		require.Equal(t, http.StatusCreated, code)
		require.Equal(t, "pending", created["state"])
		require.Equal(t, "move", created["kind"])
		require.Equal(t, "ARCHIVE", created["destination_alias"])

		code, again := post(t, b, body)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, created["id"], again["id"])

		code, conflict := post(t, b, `{"email_id":"`+b.email.String()+`","kind":"delete","request_id":"r-1"}`)
		require.Equal(t, http.StatusConflict, code)
		require.Equal(t, "RequestIdReused", conflict["error"])
		require.Equal(t, 1, count(ctx, t, b))

		resp, err := http.Get(b.srv.URL + "/api/v1/mutations/" + created["id"].(string))
		require.NoError(t, err)
		defer resp.Body.Close()
		require.Equal(t, http.StatusOK, resp.StatusCode)
		var got map[string]any
		require.NoError(t, json.NewDecoder(resp.Body).Decode(&got))
		require.Equal(t, created["id"], got["id"])

		missing, err := http.Get(b.srv.URL + "/api/v1/mutations/" + uuid.NewString())
		require.NoError(t, err)
		defer missing.Body.Close()
		require.Equal(t, http.StatusNotFound, missing.StatusCode)
	})

	t.Run("SameRequestConcurrentlyIsOneChange", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		body := `{"email_id":"` + b.email.String() + `","kind":"mark-read","request_id":"same"}`
		const callers = 4
		codes := make([]int, callers)
		ids := make([]any, callers)
		errs := make([]error, callers)
		var wg sync.WaitGroup
		for i := range callers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				var out map[string]any
				codes[i], out, errs[i] = send(b, body)
				ids[i] = out["id"]
			}()
		}
		wg.Wait()
		created := 0
		for i := range callers {
			require.NoError(t, errs[i])
			require.Contains(t, []int{http.StatusCreated, http.StatusOK}, codes[i])
			if codes[i] == http.StatusCreated {
				created++
			}
			require.Equal(t, ids[0], ids[i])
		}
		require.Equal(t, 1, created)
		require.Equal(t, 1, count(ctx, t, b))
	})

	t.Run("BadInputIsRefusedByNameAndRecordsNothing", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		// A message of the same folder the server expunged.
		served, found, err := mailstore.ReadMutableEmail(ctx, b.pool, b.email)
		require.NoError(t, err)
		require.True(t, found)
		raw := []byte("Subject: gone\r\n\r\nexpunged on the server\r\n")
		tombstoned, err := mailstore.UpsertOccurrence(ctx, b.pool, mailstore.Occurrence{AccountID: served.AccountID,
			FolderID: served.FolderID, UIDValidity: 1, UID: 8, Size: int64(len(raw)), Raw: raw, Availability: mailstore.Available})
		require.NoError(t, err)
		dbassert.MarkExpunged(t, b.pool, tombstoned)
		email := b.email.String()
		for _, tc := range []struct {
			body   string
			status int
			reason string
		}{
			{`{"email_id":"` + uuid.NewString() + `","kind":"delete"}`, http.StatusNotFound, "EmailUnknown"},
			{`{"email_id":"` + tombstoned.String() + `","kind":"delete"}`, http.StatusGone, "EmailNoLongerServed"},
			{`{"email_id":"` + email + `","kind":"move","destination_alias":"nowhere"}`, http.StatusBadRequest, "DestinationAliasUnknown"},
			{`{"email_id":"` + email + `","kind":"move","destination_alias":"inbox"}`, http.StatusBadRequest, "DestinationIsSource"},
			{`{"email_id":"` + email + `","kind":"move","destination_alias":"later"}`, http.StatusConflict, "DestinationAliasUnresolved"},
			{`{"email_id":"` + email + `","kind":"copy"}`, http.StatusBadRequest, "DestinationRequired"},
			{`{"email_id":"` + email + `","kind":"shred"}`, http.StatusBadRequest, "MutationKindUnknown"},
			{`{"email_id":"nope","kind":"delete"}`, http.StatusBadRequest, "EmailIdInvalid"},
			{`{"email_id":"` + email + `","kind":"delete","extra":1}`, http.StatusBadRequest, "RequestBodyInvalid"},
		} {
			code, out := post(t, b, tc.body)
			require.Equal(t, tc.status, code, tc.body)
			require.Equal(t, tc.reason, out["error"], tc.body)
		}
		require.Equal(t, 0, count(ctx, t, b))
	})
}

// TestCollector: the outstanding changes are reported per account, kind
// and state — every combination for each configured account, labelled with
// its configured identifier — so which account waits on what reads from
// /metrics; an account no longer configured keeps its own series.
func TestCollector(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.Pool(t)
	email := func(account string) uuid.UUID {
		accountID, err := mailstore.EnsureAccount(ctx, pool, account)
		require.NoError(t, err)
		var inbox mailstore.Binding
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			var err error
			inbox, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
			return err
		}))
		id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID, UIDValidity: 1, UID: 1,
			Size: 1, Raw: []byte("x"), Availability: mailstore.Available})
		require.NoError(t, err)
		return id
	}
	primary, other, gone := email("primary"), email("other"), email("gone")
	recorded := time.Now().Add(-time.Hour)
	var dead mailstore.Mutation
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		if _, _, err := mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: primary, Kind: mailstore.MutationMarkRead, RequestID: "a"}, recorded); err != nil {
			return err
		}
		if _, _, err := mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: other, Kind: mailstore.MutationMarkRead, RequestID: "c"}, recorded.Add(30*time.Minute)); err != nil {
			return err
		}
		if _, _, err := mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: gone, Kind: mailstore.MutationMarkUnread, RequestID: "d"}, recorded); err != nil {
			return err
		}
		var err error
		dead, _, err = mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: primary, Kind: mailstore.MutationDelete, RequestID: "b"}, recorded)
		return err
	}))
	require.NoError(t, mailstore.FinishMutation(ctx, pool, dead.ID, mailstore.MutationDeadLettered, mutation.CodeNoSafeWay, time.Now()))

	cfg := &config.Config{Accounts: []config.Account{{ID: "Primary"}, {ID: "other"}}}
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(mutation.NewCollector(pool, cfg)))
	families, err := reg.Gather()
	require.NoError(t, err)
	values := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			values[f.GetName()+"/"+labels["account"]+"/"+labels["kind"]+"/"+labels["state"]] = m.GetGauge().GetValue()
		}
	}
	require.Len(t, values, 2*(2*5*3)+2, "every kind and state of every configured account, and the unconfigured account's one group")
	require.Equal(t, 1.0, values["mailfathom_mailbox_mutations_outstanding/Primary/mark-read/pending"])
	require.Equal(t, 1.0, values["mailfathom_mailbox_mutations_outstanding/Primary/delete/dead-lettered"])
	require.Equal(t, 0.0, values["mailfathom_mailbox_mutations_outstanding/Primary/move/pending"])
	require.Equal(t, 1.0, values["mailfathom_mailbox_mutations_outstanding/other/mark-read/pending"])
	require.Equal(t, 0.0, values["mailfathom_mailbox_mutations_outstanding/other/delete/dead-lettered"])
	require.Equal(t, 1.0, values["mailfathom_mailbox_mutations_outstanding/gone/mark-unread/pending"])
	require.InDelta(t, 3600, values["mailfathom_mailbox_mutations_oldest_outstanding_age_seconds/Primary/mark-read/pending"], 120)
	require.InDelta(t, 1800, values["mailfathom_mailbox_mutations_oldest_outstanding_age_seconds/other/mark-read/pending"], 120)
	require.Equal(t, 0.0, values["mailfathom_mailbox_mutations_oldest_outstanding_age_seconds/Primary/move/pending"])
}
