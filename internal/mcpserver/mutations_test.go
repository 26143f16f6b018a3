package mcpserver_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mcpserver"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestGetMutationSaysUnjoined: get_mutation tells an assistant that a move
// the server carried without naming where it put the message is
// "completed, unjoined", so the two messages it may list for a moment are
// not read as a move that failed.
func TestGetMutationSaysUnjoined(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	pool := dbtest.Pool(t)
	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(t, err)
	var move mailstore.Mutation
	require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		inbox, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		if err != nil {
			return err
		}
		archive, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "ARCHIVE", "Archive", "/")
		if err != nil {
			return err
		}
		email, err := mailstore.UpsertOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID, UIDValidity: 1, UID: 1,
			Size: 1, Raw: []byte("x"), Availability: mailstore.Available})
		if err != nil {
			return err
		}
		move, _, err = mailstore.RecordMutation(ctx, tx, mailstore.MutationRequest{EmailID: email, Kind: mailstore.MutationRelocate,
			DestinationFolderID: archive.ID, RequestID: "r"}, time.Now())
		if err != nil {
			return err
		}
		if err := mailstore.AdvanceMutation(ctx, tx, move.ID, mailstore.StageRecorded,
			mailstore.MutationAdvance{Stage: mailstore.StagePlacementIssued, Path: mailstore.PathMove}, time.Now()); err != nil {
			return err
		}
		return mailstore.AdvanceMutation(ctx, tx, move.ID, mailstore.StagePlacementIssued, mailstore.MutationAdvance{Stage: mailstore.StageCompleted}, time.Now())
	}))

	inserter, err := jobqueue.NewInsertClient(pool)
	require.NoError(t, err)
	registry, err := outbound.NewRegistry(resilience.DefaultBudgets(), nil, nil)
	require.NoError(t, err)
	cfg := &config.Config{
		Accounts: []config.Account{{ID: "primary", Folders: []config.Folder{{Alias: "INBOX"}, {Alias: "ARCHIVE"}}}},
		MCP:      config.MCP{MaxResults: 10, MaxCharacters: 1000},
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Pool: pool, Config: cfg, Inserter: inserter, Transport: mcpserver.TransportStdio,
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

	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: "get_mutation", Arguments: map[string]any{"mutation_id": move.ID.String()}})
	require.NoError(t, err)
	require.False(t, res.IsError)
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var got struct {
		State     string `json:"state"`
		Summary   string `json:"summary"`
		Placement string `json:"placement"`
	}
	require.NoError(t, json.Unmarshal(raw, &got))
	require.Equal(t, "completed", got.State)
	require.Equal(t, "completed, unjoined", got.Summary)
	require.Equal(t, "unjoined", got.Placement)
}
