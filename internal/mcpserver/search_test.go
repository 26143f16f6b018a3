package mcpserver_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mcpserver"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/mimex"
)

// TestSearchTools drives search_emails and find_similar_emails over an
// in-memory MCP session against stored, embedded mail: 600 newsletters
// that match "harbour tide table" exactly and 30 older reports from the
// harbour master that match it less well.
func TestSearchTools(t *testing.T) {
	t.Parallel()
	const dims = 64

	type testBundle struct {
		ctx        context.Context
		pool       *pgxpool.Pool
		cs         *mcp.ClientSession
		provider   *embedtest.Server
		searcher   *mailsearch.Searcher
		reports    []uuid.UUID
		unembedded uuid.UUID
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		b := &testBundle{ctx: ctx, pool: pool}
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		require.NoError(t, err)
		var all []uuid.UUID
		for i := range 631 {
			from, body := "Tides <news@example.test>", "harbour tide table"
			sent := time.Date(2025, 5, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)
			if i < 31 {
				from, body = "Harbour Master <master@example.test>", fmt.Sprintf("report %d: the harbour tide table and the crane winches", i)
				sent = sent.AddDate(-1, 0, 0)
			}
			raw := []byte("From: " + from + "\r\nSubject: weekly\r\nDate: " + sent.Format(time.RFC1123Z) + "\r\nContent-Type: text/plain\r\n\r\n" + body + "\r\n")
			rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
			id, err := searchindex.WriteOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
				UIDValidity: 1, UID: uint32(i + 1), Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw}, &rec)
			require.NoError(t, err)
			all = append(all, id)
		}
		require.NoError(t, tx.Commit(ctx))
		// The last report is stored and not yet embedded.
		b.reports, b.unembedded = all[:30], all[30]
		profile, err := searchindex.EnsureProfile(ctx, pool, "test-model", dims)
		require.NoError(t, err)
		embedded := append(append([]uuid.UUID{}, all[:30]...), all[31:]...)
		pending, err := searchindex.PassagesAwaitingVectors(ctx, pool, profile, embedded)
		require.NoError(t, err)
		var vs []searchindex.PassageVector
		for _, p := range pending {
			vs = append(vs, searchindex.PassageVector{Passage: p, Vector: embedtest.Embed(p.Text, dims)})
		}
		_, err = searchindex.WriteVectors(ctx, pool, profile, vs)
		require.NoError(t, err)

		b.provider = embedtest.Start(t, embedtest.Options{Dimensions: dims})
		reg, err := outbound.NewRegistry(nil, nil, nil)
		require.NoError(t, err)
		client, err := embedding.NewClient(embedding.Options{URL: b.provider.URL,
			Profile: embedding.Profile{Model: "test-model", Dimensions: dims}, Registry: reg})
		require.NoError(t, err)
		b.searcher = &mailsearch.Searcher{Querier: pool, Registry: reg, Configuration: "simple", Accounts: []string{"primary"}, Embedder: client}
		inserter, err := jobqueue.NewInsertClient(pool)
		require.NoError(t, err)
		cfg := &config.Config{
			Accounts: []config.Account{{ID: "primary", Folders: []config.Folder{{Alias: "INBOX"}}}},
			MCP:      config.MCP{MaxResults: 25, MaxCharacters: 1000},
		}
		srv, err := mcpserver.New(mcpserver.Options{
			Pool: pool, Config: cfg, Inserter: inserter, Transport: mcpserver.TransportStdio, Searcher: b.searcher,
			Status: status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }},
		})
		require.NoError(t, err)
		st, ct := mcp.NewInMemoryTransports()
		ss, err := srv.Connect(ctx, st, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = ss.Close() })
		b.cs, err = mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
		require.NoError(t, err)
		t.Cleanup(func() { _ = b.cs.Close() })
		return b
	}
	type email struct {
		EmailID string   `json:"email_id"`
		From    string   `json:"from"`
		Score   float64  `json:"score"`
		Labels  []string `json:"labels"`
	}
	type answer struct {
		Mode        string  `json:"mode"`
		Emails      []email `json:"emails"`
		LexicalOnly string  `json:"lexical_only"`
	}
	call := func(t *testing.T, b *testBundle, tool string, args map[string]any) (answer, string) {
		t.Helper()
		res, err := b.cs.CallTool(b.ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		require.NoError(t, err)
		if res.IsError {
			var text strings.Builder
			for _, c := range res.Content {
				text.WriteString(c.(*mcp.TextContent).Text)
			}
			return answer{}, text.String()
		}
		raw, err := json.Marshal(res.StructuredContent)
		require.NoError(t, err)
		var out answer
		require.NoError(t, json.Unmarshal(raw, &out))
		return out, ""
	}
	fromMaster := func(t *testing.T, emails []email) {
		t.Helper()
		for _, e := range emails {
			require.Equal(t, "master@example.test", e.From)
		}
	}

	t.Run("AFilterNeverShrinksTheAnswer", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		for _, mode := range []string{"lexical", "semantic", "hybrid"} {
			for _, filter := range []map[string]any{{"from": "harbour master"}, {"sent_until": "2025-01-01"}} {
				args := map[string]any{"query": "harbour tide table", "mode": mode, "limit": 20}
				for k, v := range filter {
					args[k] = v
				}
				out, refusal := call(t, b, "search_emails", args)
				require.Empty(t, refusal)
				require.Len(t, out.Emails, 20, "%s %v: as many as asked, though 600 others rank above them", mode, filter)
				fromMaster(t, out.Emails)
				require.Empty(t, out.LexicalOnly)
			}
		}
	})

	t.Run("LabelsAnsweredAndFiltered", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		dbassert.SetLabels(t, b.pool, b.reports[3], []string{`\Inbox`, "Reports"})
		got, refused := call(t, b, "search_emails", map[string]any{"query": "crane winches", "mode": "lexical", "label": "reports"})
		require.Empty(t, refused)
		require.Len(t, got.Emails, 1, "the label filter, any case")
		require.Equal(t, b.reports[3].String(), got.Emails[0].EmailID)
		require.Equal(t, []string{`\Inbox`, "Reports"}, got.Emails[0].Labels)
		read, err := b.cs.CallTool(b.ctx, &mcp.CallToolParams{Name: "get_email", Arguments: map[string]any{"email_id": b.reports[3].String()}})
		require.NoError(t, err)
		require.False(t, read.IsError)
		require.Equal(t, []any{`\Inbox`, "Reports"}, read.StructuredContent.(map[string]any)["labels"])
	})

	t.Run("FindSimilarEmails", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		out, refusal := call(t, b, "find_similar_emails", map[string]any{"email_id": b.reports[0].String()})
		require.Empty(t, refusal)
		require.Len(t, out.Emails, 25, "bounded by MAILFATHOM_MCP_MAX_RESULTS")
		for _, e := range out.Emails {
			require.NotEqual(t, b.reports[0].String(), e.EmailID, "not the message itself")
		}
		fromMaster(t, out.Emails) // the other 29 reports are nearest
		require.Positive(t, out.Emails[0].Score)

		// The same filters and bounds as search_emails.
		out, refusal = call(t, b, "find_similar_emails", map[string]any{"email_id": b.reports[0].String(), "from": "tides", "limit": 7})
		require.Empty(t, refusal)
		require.Len(t, out.Emails, 7)
		for _, e := range out.Emails {
			require.Equal(t, "news@example.test", e.From)
		}

		for _, tc := range []struct {
			args map[string]any
			want string
		}{
			{map[string]any{"email_id": b.unembedded.String()}, "not embedded yet"},
			{map[string]any{"email_id": uuid.NewString()}, "no stored email has this email_id"},
			{map[string]any{"email_id": "42"}, "email_id must be"},
			{map[string]any{"email_id": b.reports[0].String(), "alias": "nowhere"}, "not a configured folder alias"},
		} {
			_, refusal := call(t, b, "find_similar_emails", tc.args)
			require.Contains(t, refusal, tc.want, "%v", tc.args)
		}
		b.searcher.Embedder = nil
		_, refusal = call(t, b, "find_similar_emails", map[string]any{"email_id": b.reports[0].String()})
		require.Contains(t, refusal, "needs an embedding profile")
	})

	t.Run("HybridSaysWhenItRankedByWordsAlone", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		b.provider.SetFault(embedtest.Fault{Kind: embedtest.ServerError})
		out, refusal := call(t, b, "search_emails", map[string]any{"query": "crane winches", "limit": 5})
		require.Empty(t, refusal)
		require.Equal(t, "hybrid", out.Mode)
		require.Equal(t, mailsearch.LexicalOnlyProviderFailed+" [EmbeddingProviderUnavailable]", out.LexicalOnly)
		require.Len(t, out.Emails, 5)
		fromMaster(t, out.Emails)
		_, refusal = call(t, b, "search_emails", map[string]any{"query": "crane winches", "mode": "semantic"})
		require.Contains(t, refusal, "did not embed the query")
	})
}
