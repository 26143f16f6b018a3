package mcpserver

import (
	"context"
	"encoding/json"
	"testing"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"
)

// TestToolSchemas lists the tools over an in-memory connection: every tool
// is offered with an object input schema naming its arguments, and the
// arguments a tool cannot do without are required.
func TestToolSchemas(t *testing.T) {
	t.Parallel()
	s := &server{Options: Options{Transport: TransportStdio}}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mailfathom", Version: Version}, &mcp.ServerOptions{Capabilities: &mcp.ServerCapabilities{}})
	s.addAccountTools(srv)
	s.addEmailTools(srv)
	s.addSearchTools(srv)
	s.addMutationTools(srv)

	ctx := context.Background()
	st, ct := mcp.NewInMemoryTransports()
	ss, err := srv.Connect(ctx, st, nil)
	require.NoError(t, err)
	defer ss.Close()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test", Version: "1"}, nil).Connect(ctx, ct, nil)
	require.NoError(t, err)
	defer cs.Close()
	res, err := cs.ListTools(ctx, nil)
	require.NoError(t, err)

	type schema struct {
		Type       string         `json:"type"`
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	tools := map[string]schema{}
	for _, tool := range res.Tools {
		raw, err := json.Marshal(tool.InputSchema)
		require.NoError(t, err)
		var sc schema
		require.NoError(t, json.Unmarshal(raw, &sc))
		require.Equal(t, "object", sc.Type, tool.Name)
		require.NotEmpty(t, tool.Description, tool.Name)
		require.NotNil(t, tool.OutputSchema, tool.Name)
		tools[tool.Name] = sc
	}
	require.Len(t, tools, 13)
	require.ElementsMatch(t, []string{"query"}, tools["search_emails"].Required)
	require.ElementsMatch(t, []string{"email_id"}, tools["find_similar_emails"].Required)
	require.Contains(t, tools["find_similar_emails"].Properties, "from", "the listing's filters are similar mail's too")
	require.Contains(t, tools["search_emails"].Properties, "has_attachment", "the listing's filters are search's too")
	require.Contains(t, tools["list_emails"].Properties, "cursor")
	require.Contains(t, tools["list_emails"].Properties, "received_since")
	require.Contains(t, tools["list_emails"].Properties, "label")
	require.Contains(t, tools["search_emails"].Properties, "label", "the listing's filters are search's too")
	require.ElementsMatch(t, []string{"email_id", "destination_alias"}, tools["move_email"].Required)
	require.ElementsMatch(t, []string{"email_id"}, tools["delete_email"].Required)
	require.Contains(t, tools["delete_email"].Properties, "request_id")
	require.ElementsMatch(t, []string{"email_id"}, tools["get_email"].Required)
	require.Contains(t, tools["get_email"].Properties, "max_characters")
	require.ElementsMatch(t, []string{"mutation_id"}, tools["get_mutation"].Required)
	require.Empty(t, tools["list_accounts"].Required)
}
