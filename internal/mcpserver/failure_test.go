package mcpserver_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/mcpserver"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
)

// TestAFailedCallTellsTheCallerToRetry calls tools while the database is
// unreachable (nothing listens where the pool points): each answers a tool
// error asking to try again, not a protocol failure, and the log says
// which tool failed and the failure's type, never what was asked.
func TestAFailedCallTellsTheCallerToRetry(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := pgxpool.New(ctx, "postgres://mailfathom@127.0.0.1:1/none?connect_timeout=1")
	require.NoError(t, err)
	defer pool.Close()
	inserter, err := jobqueue.NewInsertClient(pool)
	require.NoError(t, err)
	registry, err := outbound.NewRegistry(resilience.DefaultBudgets(), nil, nil)
	require.NoError(t, err)
	cfg := &config.Config{
		Accounts: []config.Account{{ID: "primary", Folders: []config.Folder{{Alias: "INBOX"}}}},
		MCP:      config.MCP{MaxResults: 10, MaxCharacters: 1000},
	}
	var log capture.Buffer
	srv, err := mcpserver.New(mcpserver.Options{
		Pool: pool, Config: cfg, Inserter: inserter, Transport: mcpserver.TransportStdio, Logger: log.Logger(),
		Searcher: &mailsearch.Searcher{Querier: pool, Registry: registry, Configuration: "simple", Accounts: []string{"primary"}},
		Status:   status.Options{Config: cfg, Backoff: func(int) time.Duration { return time.Minute }},
	})
	require.NoError(t, err)

	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()

	const sentinel = "sentinel-correspondent@example.test"
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_emails", Arguments: map[string]any{"from": sentinel}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "try again")
	require.NotContains(t, res.Content[0].(*mcp.TextContent).Text, "127.0.0.1", "the cause stays in the process")

	// A refusal needs no database and is told as it is.
	res, err = cs.CallTool(ctx, &mcp.CallToolParams{Name: "list_emails", Arguments: map[string]any{"account": "someone-else"}})
	require.NoError(t, err)
	require.True(t, res.IsError)
	require.Contains(t, res.Content[0].(*mcp.TextContent).Text, "not a configured account; configured: primary")

	out := log.String()
	require.Contains(t, out, `"msg":"an MCP tool call failed","tool":"list_emails","transport":"stdio","error_type":`)
	require.Contains(t, out, `"outcome":"failed"`)
	require.Contains(t, out, `"outcome":"refused"`)
	var sw capture.Sweep
	sw.Add("log", out)
	sw.RequireNone(t, sentinel, "someone-else")
}
