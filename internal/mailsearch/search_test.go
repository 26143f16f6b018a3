package mailsearch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
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
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
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
	ids := func(res mailsearch.Result) []uuid.UUID {
		var out []uuid.UUID
		for _, h := range res.Hits {
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
		require.Empty(t, lexical.Hits)
		semantic, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes", Mode: mailsearch.Semantic})
		require.NoError(t, err)
		require.Equal(t, b.ids["crane"], semantic.Hits[0].StoredEmailID)
		require.NotNil(t, semantic.Hits[0].Passage)
		hybrid, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes"})
		require.NoError(t, err)
		require.Equal(t, mailsearch.Hybrid, hybrid.Mode)
		require.Empty(t, hybrid.LexicalOnly)
		require.Equal(t, b.ids["crane"], hybrid.Hits[0].StoredEmailID)
		require.Equal(t, "Crane inspection report", hybrid.Hits[0].Subject)
		require.Equal(t, "office@example.test", hybrid.Hits[0].From)
		require.Equal(t, "office@example.test", semantic.Hits[0].From)
		require.Equal(t, "primary", hybrid.Hits[0].Account)
		require.Equal(t, "INBOX", hybrid.Hits[0].Alias)

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
		dbassert.MarkExpunged(t, b.pool, b.ids["crane"])
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
		require.Empty(t, hits.LexicalOnly, "lexical is the default without a profile, and says nothing")
	})

	t.Run("HybridRanksByWordsWhenTheQueryCannotBeEmbedded", func(t *testing.T) {
		t.Parallel()
		for _, tc := range []struct {
			name   string
			break_ func(b *testBundle)
			reason string
		}{
			{"NoProfile", func(b *testBundle) { b.searcher.Embedder = nil }, mailsearch.LexicalOnlyNoProfile},
			{"ProviderRefuses", func(b *testBundle) { b.provider.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized}) },
				mailsearch.LexicalOnlyProviderFailed + " [EmbeddingRequestRefused]"},
			{"ProviderDown", func(b *testBundle) { b.provider.SetFault(embedtest.Fault{Kind: embedtest.ServerError}) },
				mailsearch.LexicalOnlyProviderFailed + " [EmbeddingProviderUnavailable]"},
			// The pipeline's budget for a provider that never answers is
			// minutes; the search waits its own bound and no more.
			{"ProviderSlow", func(b *testBundle) {
				b.provider.SetFault(embedtest.Fault{Kind: embedtest.Hang})
				b.searcher.QueryEmbeddingWait = 300 * time.Millisecond
			}, mailsearch.LexicalOnlyProviderSlow},
		} {
			t.Run(tc.name, func(t *testing.T) {
				t.Parallel()
				b := setup(t)
				tc.break_(b)
				start := time.Now()
				res, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane inspection", Mode: mailsearch.Hybrid})
				require.NoError(t, err)
				require.Less(t, time.Since(start), 10*time.Second)
				require.Equal(t, mailsearch.Hybrid, res.Mode)
				require.Equal(t, tc.reason, res.LexicalOnly)
				require.Equal(t, []uuid.UUID{b.ids["crane"]}, ids(res), "the lexical half's hits")
				require.Nil(t, res.Hits[0].Passage)
			})
		}
	})

	t.Run("AQueryOfAnotherModelIsNotRanked", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		// No answer recorded a model for the profile yet: nothing to compare.
		b.provider.SetAnsweredModel("other-model")
		res, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes", Mode: mailsearch.Semantic})
		require.NoError(t, err)
		require.NotEmpty(t, res.Hits)

		profile, err := searchindex.EnsureProfile(b.ctx, b.pool, "test-model", dims)
		require.NoError(t, err)
		_, err = searchindex.RecordAnsweredModel(b.ctx, b.pool, profile, "test-model")
		require.NoError(t, err)
		b.provider.SetAnsweredModel("test-model:latest")
		res, err = b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes", Mode: mailsearch.Semantic})
		require.NoError(t, err, "Ollama's default tag names the same model")
		require.Equal(t, b.ids["crane"], res.Hits[0].StoredEmailID)

		b.provider.SetAnsweredModel("other-model")
		_, err = b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes", Mode: mailsearch.Semantic})
		var changed *embedding.ModelChangedError
		require.ErrorAs(t, err, &changed)
		require.Equal(t, embedding.ModelChangedError{Recorded: "test-model", Answered: "other-model"}, *changed)
		var provider *mailsearch.ProviderError
		require.ErrorAs(t, err, &provider)

		hybrid, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane inspection", Mode: mailsearch.Hybrid})
		require.NoError(t, err)
		require.Equal(t, mailsearch.LexicalOnlyProviderFailed+" ["+embedding.FailureModelChanged+"]", hybrid.LexicalOnly)
		require.Equal(t, []uuid.UUID{b.ids["crane"]}, ids(hybrid), "the lexical half's hits")

		// An answer naming no model is not compared.
		silent := embedtest.Start(t, embedtest.Options{Dimensions: dims, OmitModel: true})
		reg, err := outbound.NewRegistry(nil, nil, nil)
		require.NoError(t, err)
		b.searcher.Embedder, err = embedding.NewClient(embedding.Options{URL: silent.URL,
			Profile: embedding.Profile{Model: "test-model", Dimensions: dims}, Registry: reg})
		require.NoError(t, err)
		res, err = b.searcher.Search(b.ctx, mailsearch.Request{Text: "inspecting cranes", Mode: mailsearch.Semantic})
		require.NoError(t, err)
		require.Equal(t, b.ids["crane"], res.Hits[0].StoredEmailID)
	})

	t.Run("HitsCarryLabels", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		labels := []string{`\Inbox`, "Harbour"}
		dbassert.SetLabels(t, b.pool, b.ids["crane"], labels)
		for _, mode := range mailsearch.Modes {
			res, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane inspection report", Mode: mode})
			require.NoError(t, err)
			require.Equal(t, b.ids["crane"], res.Hits[0].StoredEmailID, string(mode))
			require.Equal(t, labels, res.Hits[0].Labels, string(mode))
		}
		hits, err := b.searcher.Similar(b.ctx, mailsearch.SimilarRequest{EmailID: b.ids["lunch"], Limit: 5})
		require.NoError(t, err)
		for _, h := range hits {
			if h.StoredEmailID == b.ids["crane"] {
				require.Equal(t, labels, h.Labels)
			} else {
				require.Nil(t, h.Labels, "a message without labels has none")
			}
		}
		require.Len(t, hits, 2)
		body, err := json.Marshal(mailsearch.Answer{Hits: hits})
		require.NoError(t, err)
		require.Contains(t, string(body), `"labels":["\\Inbox","Harbour"]`, "the API answers them")
	})

	t.Run("AliasOfASharedOccurrence", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		crane, found, err := mailstore.ReadMutableEmail(b.ctx, b.pool, b.ids["crane"])
		require.NoError(t, err)
		require.True(t, found)
		accountID := crane.AccountID
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		work, _, _, err := mailstore.CommitBinding(b.ctx, tx, accountID, "WORK", "Work", "/")
		require.NoError(t, err)
		require.NoError(t, tx.Commit(b.ctx))
		// The crane report is also under the label Work, stored once.
		dbassert.SetServerEmailID(t, b.pool, b.ids["crane"], "x-gm-msgid:7")
		occurrence, err := mailstore.UpsertOccurrence(b.ctx, b.pool, mailstore.Occurrence{AccountID: accountID, FolderID: work.ID,
			UIDValidity: 1, UID: 1, Size: 1, Availability: mailstore.Available, ServerEmailID: "x-gm-msgid:7", SharedEmailID: b.ids["crane"]})
		require.NoError(t, err)
		for _, mode := range mailsearch.Modes {
			for _, filter := range []*mailstore.EmailFilter{nil, {}, {From: "office"}} {
				res, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane inspection", Mode: mode, Alias: "WORK", Filter: filter})
				require.NoError(t, err)
				require.Equal(t, []uuid.UUID{b.ids["crane"]}, ids(res), "%s %v: in WORK by its occurrence there", mode, filter)
			}
		}
		similar, err := b.searcher.Similar(b.ctx, mailsearch.SimilarRequest{EmailID: b.ids["lunch"], Alias: "WORK"})
		require.NoError(t, err)
		require.Len(t, similar, 1)
		require.Equal(t, b.ids["crane"], similar[0].StoredEmailID)

		dbassert.MarkExpunged(t, b.pool, occurrence)
		for _, mode := range mailsearch.Modes {
			res, err := b.searcher.Search(b.ctx, mailsearch.Request{Text: "crane inspection", Mode: mode, Alias: "WORK"})
			require.NoError(t, err)
			require.Empty(t, res.Hits, "%s: it left WORK", mode)
		}
	})

	t.Run("SimilarMail", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.provider.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized})
		hits, err := b.searcher.Similar(b.ctx, mailsearch.SimilarRequest{EmailID: b.ids["crane"], Limit: 5})
		require.NoError(t, err, "the stored vectors need no provider")
		require.Len(t, hits, 2, "every other embedded message, the message itself left out")
		require.NotContains(t, []uuid.UUID{hits[0].StoredEmailID, hits[1].StoredEmailID}, b.ids["crane"])
		_, err = b.searcher.Similar(b.ctx, mailsearch.SimilarRequest{EmailID: b.ids["late"]})
		require.ErrorIs(t, err, mailsearch.ErrNotEmbedded)
		_, err = b.searcher.Similar(b.ctx, mailsearch.SimilarRequest{EmailID: uuid.New()})
		require.ErrorIs(t, err, mailsearch.ErrNotEmbedded)
		b.searcher.Embedder = nil
		_, err = b.searcher.Similar(b.ctx, mailsearch.SimilarRequest{EmailID: b.ids["crane"]})
		require.ErrorIs(t, err, mailsearch.ErrNoProfile)
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

		require.NotContains(t, body, "lexical_only")

		b.provider.SetFault(embedtest.Fault{Kind: embedtest.Unauthorized})
		code, body = get(t, url.Values{"q": {"crane"}, "mode": {"semantic"}}, true)
		require.Equal(t, http.StatusServiceUnavailable, code)
		require.Contains(t, body["error"], "mode=lexical")
		code, body = get(t, url.Values{"q": {"crane"}}, true)
		require.Equal(t, http.StatusOK, code, "hybrid answers by words")
		require.Equal(t, "hybrid", body["mode"])
		require.Equal(t, mailsearch.LexicalOnlyProviderFailed+" [EmbeddingRequestRefused]", body["lexical_only"])
		require.Len(t, body["hits"].([]any), 1)
	})
}

// TestAFilterNeverShrinksTheAnswer searches mail where the messages a
// filter admits are outranked by many it does not: alice's older, longer
// reports among bulk mail that matches the query exactly and is newer. A
// search narrowed to alice's, by sender, by sending date or by label, answers as
// many as asked in every mode — for a filter admitting few messages
// (searched alone) and many (each ranking searching deeper).
func TestAFilterNeverShrinksTheAnswer(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name        string
		alice, bulk int
	}{
		{"FewAdmitted", 60, 700},
		{"ManyAdmitted", 2100, 1200},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
			defer cancel()
			pool := dbtest.Pool(t)
			accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
			require.NoError(t, err)
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
			require.NoError(t, err)
			var all []uuid.UUID
			for i := range tc.alice + tc.bulk {
				from, sent, body := "Bulk <bulk@example.test>", time.Date(2025, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Minute),
					"harbour report"
				labels := []string{`\Inbox`}
				if i < tc.alice {
					from, sent = "Alice <alice@example.test>", time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Minute)
					labels = []string{`\Inbox`, "Docks"}
					body = fmt.Sprintf("harbour report number %d from the dock office about cranes, winches and tides", i)
				}
				raw := []byte("From: " + from + "\r\nSubject: weekly\r\nDate: " + sent.Format(time.RFC1123Z) +
					"\r\nContent-Type: text/plain\r\n\r\n" + body + "\r\n")
				rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
				id, err := searchindex.WriteOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
					UIDValidity: 1, UID: uint32(i + 1), Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw,
					ServerEmailID: fmt.Sprintf("x-gm-msgid:%d", i+1), Labels: labels}, &rec)
				require.NoError(t, err)
				all = append(all, id)
			}
			require.NoError(t, tx.Commit(ctx))
			profile, err := searchindex.EnsureProfile(ctx, pool, "test-model", dims)
			require.NoError(t, err)
			for chunk := range slices.Chunk(all, 500) {
				pending, err := searchindex.PassagesAwaitingVectors(ctx, pool, profile, chunk)
				require.NoError(t, err)
				var vs []searchindex.PassageVector
				for _, p := range pending {
					vs = append(vs, searchindex.PassageVector{Passage: p, Vector: embedtest.Embed(p.Text, dims)})
				}
				_, err = searchindex.WriteVectors(ctx, pool, profile, vs)
				require.NoError(t, err)
			}
			provider := embedtest.Start(t, embedtest.Options{Dimensions: dims})
			reg, err := outbound.NewRegistry(nil, nil, nil)
			require.NoError(t, err)
			client, err := embedding.NewClient(embedding.Options{URL: provider.URL,
				Profile: embedding.Profile{Model: "test-model", Dimensions: dims}, Registry: reg})
			require.NoError(t, err)
			searcher := &mailsearch.Searcher{Querier: pool, Registry: reg, Configuration: "simple", Accounts: []string{"primary"}, Embedder: client}

			alicesID := map[uuid.UUID]bool{}
			for _, id := range all[:tc.alice] {
				alicesID[id] = true
			}
			until := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
			for _, filter := range []mailstore.EmailFilter{{From: "alice"}, {SentUntil: &until}, {Label: "docks"}} {
				for _, mode := range mailsearch.Modes {
					f := filter
					res, err := searcher.Search(ctx, mailsearch.Request{Text: "harbour report", Mode: mode, Limit: 50, Filter: &f})
					require.NoError(t, err)
					require.Equal(t, 50, len(res.Hits), "%s, %+v: as many as asked", mode, filter)
					for _, h := range res.Hits {
						require.True(t, alicesID[h.StoredEmailID], "%s: a message the filter does not admit", mode)
					}
				}
				f := filter
				similar, err := searcher.Similar(ctx, mailsearch.SimilarRequest{EmailID: all[len(all)-1], Limit: 50, Filter: &f})
				require.NoError(t, err)
				require.Equal(t, 50, len(similar), "similar to a bulk message, narrowed to alice's")
			}
		})
	}
}
