package mcpserver

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
)

// changeIn is a change to one message that places it nowhere.
type changeIn struct {
	EmailID   string `json:"email_id" jsonschema:"the message's id, as the listing and search tools answer it"`
	RequestID string `json:"request_id,omitempty" jsonschema:"this request's identity, 1 to 200 printable characters: asking again with the same request_id performs one change; generated and answered when absent"`
}

// placeIn is a move or a copy.
type placeIn struct {
	EmailID          string `json:"email_id" jsonschema:"the message's id, as the listing and search tools answer it"`
	DestinationAlias string `json:"destination_alias" jsonschema:"the folder alias to place the message in (from list_folders), of the message's account"`
	RequestID        string `json:"request_id,omitempty" jsonschema:"this request's identity, 1 to 200 printable characters: asking again with the same request_id performs one change; generated and answered when absent"`
}

type mutationIDIn struct {
	MutationID string `json:"mutation_id" jsonschema:"the id a change tool answered"`
}

// mutationOut is a recorded change and where it stands.
type mutationOut struct {
	mutation.View
	// Created is false when the request id already named this change.
	Created bool `json:"created" jsonschema:"false when request_id already named this change, which is answered again and not asked twice"`
}

func (s *server) addMutationTools(srv *mcp.Server) {
	const carried = " The change is recorded at once and carried out on the mail server shortly after; follow it with get_mutation."
	for _, t := range []struct {
		name, title, kind, description string
		destructive                    bool
	}{
		{"delete_email", "Delete an email", "delete", "Deletes the message from its folder on the mail server.", true},
		{"mark_read", "Mark an email read", "mark-read", "Marks the message read (\\Seen) on the mail server.", false},
		{"mark_unread", "Mark an email unread", "mark-unread", "Marks the message unread on the mail server.", false},
	} {
		addTool(s, srv, &mcp.Tool{Name: t.name, Title: t.title, Description: t.description + carried,
			Annotations: &mcp.ToolAnnotations{DestructiveHint: &t.destructive, IdempotentHint: true}},
			func(ctx context.Context, in changeIn) (mutationOut, int, error) {
				return s.record(ctx, t.kind, in.EmailID, "", in.RequestID)
			})
	}
	for _, t := range []struct{ name, title, kind, description string }{
		{"move_email", "Move an email", "move", "Moves the message to another folder alias of its account on the mail server."},
		{"copy_email", "Copy an email", "copy", "Copies the message into another folder alias of its account on the mail server."},
	} {
		addTool(s, srv, &mcp.Tool{Name: t.name, Title: t.title, Description: t.description + carried,
			Annotations: &mcp.ToolAnnotations{DestructiveHint: new(bool), IdempotentHint: true}},
			func(ctx context.Context, in placeIn) (mutationOut, int, error) {
				return s.record(ctx, t.kind, in.EmailID, in.DestinationAlias, in.RequestID)
			})
	}
	addTool(s, srv, &mcp.Tool{
		Name:        "get_mutation",
		Title:       "Follow a change",
		Description: "Reports where a change stands: pending, converging, completed or dead-lettered (given up, with a failure code). A move or copy the mail server carried without naming where it put the message reads \"completed, unjoined\" in summary: the copy in the destination folder is listed as a message of its own, and a moved message's original stops being listed once synchronization sees it leave.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.getMutation)
}

// record records a change exactly as the command line and the HTTP API do.
func (s *server) record(ctx context.Context, kind, email, destination, requestID string) (mutationOut, int, error) {
	id, err := emailID(email)
	if err != nil {
		return mutationOut{}, 0, err
	}
	m, created, err := mutation.Record(ctx, s.Pool, s.Config, s.Inserter, mutation.Request{
		EmailID: id, Kind: kind, DestinationAlias: destination, RequestID: requestID,
	})
	var refusal *mutation.RequestError
	if errors.As(err, &refusal) {
		return mutationOut{}, 0, refusef("refused, nothing was recorded: %v", refusal)
	}
	if err != nil {
		return mutationOut{}, 0, err
	}
	if created {
		s.Logger.InfoContext(ctx, "mailbox mutation requested", "mutation", m.ID.String(), "kind", string(m.Kind),
			"account", m.AccountKey, "transport", s.Transport)
	}
	return mutationOut{View: mutation.ViewOf(m), Created: created}, 1, nil
}

func (s *server) getMutation(ctx context.Context, in mutationIDIn) (mutation.View, int, error) {
	id, err := uuid.Parse(strings.TrimSpace(in.MutationID))
	if err != nil {
		return mutation.View{}, 0, refusef("mutation_id must be an id a change tool answered")
	}
	m, found, err := mailstore.ReadMutation(ctx, s.Pool, id)
	if err != nil {
		return mutation.View{}, 0, err
	}
	if !found || !slices.Contains(s.accounts, m.AccountKey) {
		return mutation.View{}, 0, refusef("no change has this mutation_id")
	}
	return mutation.ViewOf(m), 1, nil
}
