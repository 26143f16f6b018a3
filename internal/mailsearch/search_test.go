package mailsearch_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"net/url"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

const dims = 64

func TestSearch(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		ctx      context.Context
		pool     *pgxpool.Pool
		provider *embedtest.Server
		searcher *mailsearch.Searcher
		ids      map[string]uuid.UUID
	}
	// setup stores four messages of account primary, embeds all but the
	// "late" one, and returns a searcher with the profile.
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		require.NoError(t, err)
		b := &testBundle{ctx: ctx, pool: pool, ids: map[string]uuid.UUID{}}
		for i, m := range []struct{ name, subject, body string }{
			{"crane", "Crane inspection report", "The inspectors examined both harbour cranes and found the winches worn."},
			{"lunch", "Lunch on Friday", "Shall we have noodles at the corner place?"},
			{"budget", "Quarterly budget", "The budget review for the quarter is attached."},
			{"late", "Pelican sightings", "Eleven pelicans near the harbour this morning."},
		} {
			raw := []byte("From: Harbour Office <office@example.test>\r\nSubject: " + m.subject + "\r\nDate: Mon, 02 Jun 2025 10:00:00 +0000\r\nContent-Type: text/plain\r\n\r\n" + m.body + "\r\n")
			rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
			id, err := searchindex.WriteOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
				UIDValidity: 1, UID: uint32(i + 1), Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw}, &rec)
			require.NoError(t, err)
			b.ids[m.name] = id
		}
		require.NoError(t, tx.Commit(ctx))

		b.provider = embedtest.Start(t, embedtest.Options{Dimensions: dims})
		reg, err := outbound.NewRegistry(nil, nil, nil)
		require.NoError(t, err)
		client, err := embedding.NewClient(embedding.Options{URL: b.provider.URL,
			Profile: embedding.Profile{Model: "test-model", Dimensions: dims}, Registry: reg})
		require.NoError(t, err)
		profile, err := searchindex.EnsureProfile(ctx, pool, "test-model", dims)
		require.NoError(t, err)
		pending, err := searchindex.PassagesAwaitingVectors(ctx, pool, profile, []uuid.UUID{b.ids["crane"], b.ids["lunch"], b.ids["budget"]})
		require.NoError(t, err)
		var vs []searchindex.PassageVector
		for _, p := range pending {
			vs = append(vs, searchindex.PassageVector{Passage: p, Vector: embedtest.Embed(p.Text, dims)})
		}
		_, err = searchindex.WriteVectors(ctx, pool, profile, vs)
		require.NoError(t, err)
		b.searcher = &mailsearch.Searcher{Querier: pool, Registry: reg, Configuration: "simple", Accounts: []string{"primary"}, Embedder: client}
		return b
	}
	ids := func(hits []mailsearch.Hit) []uuid.UUID {
		var out []uuid.UUID
		for _, h := range hits {
			out = append(out, h.StoredEmailID)
		}
		return out
	}

	t.Run("Modes", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		require.Equal(t, mailsearch.Hybrid, b.searcher.DefaultMode())

		// Shares no whole word with the report: lexical misses it,
		// semantic and hybrid find it first.
		lexical, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes", Mode: mailsearch.Lexical})
		require.NoError(t, err)
		require.Empty(t, lexical)
		semantic, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes", Mode: mailsearch.Semantic})
		require.NoError(t, err)
		require.Equal(t, b.ids["crane"], semantic[0].StoredEmailID)
		require.NotNil(t, semantic[0].Passage)
		hybrid, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes"})
		require.NoError(t, err)
		require.Equal(t, b.ids["crane"], hybrid[0].StoredEmailID)
		require.Equal(t, "Crane inspection report", hybrid[0].Subject)
		require.Equal(t, "office@example.test", hybrid[0].From)
		require.Equal(t, "office@example.test", semantic[0].From)
		require.Equal(t, "primary", hybrid[0].Account)
		require.Equal(t, "INBOX", hybrid[0].Alias)

		// Mail not yet embedded under the profile is still found by the
		// lexical half of a hybrid search.
		hybrid, err = b.searcher.Search(b.ctx, mailsearch.Request{Text: "pelicans"})
		require.NoError(t, err)
		require.Contains(t, ids(hybrid), b.ids["late"])
		semantic, err = b.searcher.Search(b.ctx, mailsearch.Request{Text: "pelicans", Mode: mailsearch.Semantic})
		require.NoError(t, err)
		require.NotContains(t, ids(semantic), b.ids["late"])
	})

	t.Run("TombstonedMailIsNeverFound", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		_, err := b.pool.Exec(b.ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, b.ids["crane"])
		require.NoError(t, err)
		for _, mode := range mailsearch.Modes {
			hits, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane inspection report", Mode: mode})
			require.NoError(t, err)
			require.NotContains(t, ids(hits), b.ids["crane"], string(mode))
		}
	})

	t.Run("WithoutAProfileOnlyLexical", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.searcher.Embedder = nil
		require.Equal(t, mailsearch.Lexical, b.searcher.DefaultMode())
		_, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane", Mode: mailsearch.Semantic})
		require.ErrorIs(t, err, mailsearch.ErrNoProfile)
		hits, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane"})
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{b.ids["crane"]}, ids(hits))
	})

	t.Run("API", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		mux := http.NewServeMux()
		protect := func(next http.Handler) http.Handler {
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if u, p, ok := r.BasicAuth(); !ok || u != "admin" || p != "secret" {
					http.Error(w, "authentication required", http.StatusUnauthorized)
					return
				}
				next.ServeHTTP(w, r)
			})
		}
		mailsearch.NewHandler(b.searcher, nil).Mount(mux, protect)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		get := func(t *testing.T, query url.Values, auth bool) (int, map[string]any) {
			t.Helper()
			req, err := http.NewRequestWithContext(b.ctx, http.MethodGet, srv.URL+"/api/v1/search?"+query.Encode(), nil)
			require.NoError(t, err)
			if auth {
				req.SetBasicAuth("admin", "secret")
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			defer resp.Body.Close()
			var body map[string]any
			_ = json.NewDecoder(resp.Body).Decode(&body)
			return resp.StatusCode, body
		}

		code, _ := get(t, url.Values{"q": {"crane"}}, false)
		require.Equal(t, http.StatusUnauthorized, code, "behind the UI's authentication")

		code, body := get(t, url.Values{"q": {"inspecting cranes"}, "limit": {"2"}}, true)
		require.Equal(t, http.StatusOK, code)
		require.Equal(t, "hybrid", body["mode"])
		hits := body["hits"].([]any)
		require.LessOrEqual(t, len(hits), 2)
		first := hits[0].(map[string]any)
		require.Equal(t, b.ids["crane"].String(), first["email_id"])
		require.Equal(t, "primary", first["account"])
		require.Equal(t, "INBOX", first["alias"])
		require.Equal(t, "Crane inspection report", first["subject"])
		require.Contains(t, first, "best_passage")
		require.Contains(t, first, "sent_at")
		require.Contains(t, first, "score")

		code, body = get(t, url.Values{"q": {"crane"}, "mode": {"lexical"}, "alias": {"inbox"}, "account": {"Primary"}}, true)
		require.Equal(t, http.StatusOK, code)
		require.Len(t, body["hits"].([]any), 1)

		for _, bad := range []url.Values{{}, {"q": {"x"}, "mode": {"fuzzy"}}, {"q": {"x"}, "limit": {"0"}}, {"q": {"x"}, "account": {"other"}}} {
			code, body = get(t, bad, true)
			require.Equal(t, http.StatusBadRequest, code, "%v", bad)
			require.NotEmpty(t, body["error"])
		}

		b.provider.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized})
		code, body = get(t, url.Values{"q": {"crane"}, "mode": {"semantic"}}, true)
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Contains(t, body["error"], "mode=lexical")
	})
}
