// Package mcpserver offers the stored mail to AI assistants over the Model
// Context Protocol: tools that list accounts and folders, list, search and
// read the served mail, find mail similar to a message, follow a
// conversation, and ask for the same mailbox changes the command line and
// the HTTP API ask for.
//
// Every answer goes to the caller only. A call is logged with the tool's
// name, the transport, a count and the duration; what the caller asked for
// and what it was answered never reach a log line, a metric label or an
// error that leaves the call. Tombstoned mail, mail of an abandoned UID
// space and mail of an account no longer configured never appear: every
// read goes through the served mail of the configured accounts.
//
// The package does not authenticate: `mailfathom mcp` is run by the user
// whose mail it serves, and serve mounts the HTTP handler behind River UI's
// basic authentication.
package mcpserver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/riverqueue/river"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/status"
)

// The transports a server is offered over, as its log lines name them.
const (
	TransportStdio = "stdio"
	TransportHTTP  = "http"
)

// Version is the server's version as it introduces itself.
const Version = "1"

// Options configure a server.
type Options struct {
	// Pool reads the mail and records mutations. Required.
	Pool *pgxpool.Pool
	// Config is the configuration in force: its accounts are the only ones
	// served, and its MCP section bounds every answer. Required.
	Config *config.Config
	// Searcher answers search_emails and find_similar_emails. Required.
	Searcher *mailsearch.Searcher
	// Inserter inserts a recorded mutation's first stage job. Required.
	Inserter *river.Client[pgx.Tx]
	// Status reads list_accounts' and list_folders' figures. Required:
	// its Config and Backoff.
	Status status.Options
	// Transport names the transport in the call log: TransportStdio or
	// TransportHTTP. Required.
	Transport string
	// Logger receives one line per call. Default: discard.
	Logger *slog.Logger
	// Metrics counts the calls. Optional.
	Metrics *Metrics
}

// server is the state the tools share.
type server struct {
	Options
	accounts []string // the configured account keys
}

// New returns an MCP server with every tool, ready to run over any
// transport.
func New(opts Options) (*mcp.Server, error) {
	switch {
	case opts.Pool == nil:
		return nil, errors.New("mcpserver: Pool is required")
	case opts.Config == nil:
		return nil, errors.New("mcpserver: Config is required")
	case opts.Searcher == nil:
		return nil, errors.New("mcpserver: Searcher is required")
	case opts.Inserter == nil:
		return nil, errors.New("mcpserver: Inserter is required")
	case opts.Status.Config == nil || opts.Status.Backoff == nil:
		return nil, errors.New("mcpserver: Status needs its Config and Backoff")
	case opts.Transport != TransportStdio && opts.Transport != TransportHTTP:
		return nil, fmt.Errorf("mcpserver: Transport must be %q or %q", TransportStdio, TransportHTTP)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	s := &server{Options: opts}
	for _, a := range opts.Config.Accounts {
		s.accounts = append(s.accounts, config.AccountKey(a.ID))
	}
	srv := mcp.NewServer(&mcp.Implementation{Name: "mailfathom", Title: "MailFathom", Version: Version}, &mcp.ServerOptions{
		Instructions: instructions,
		// No logging capability: nothing of the mail is sent as a log
		// message either.
		Capabilities: &mcp.ServerCapabilities{},
	})
	s.addAccountTools(srv)
	s.addEmailTools(srv)
	s.addSearchTools(srv)
	s.addMutationTools(srv)
	return srv, nil
}

const instructions = `MailFathom keeps a searchable copy of the user's IMAP mailboxes.
Ids are stable: an email_id names one message in one folder until it leaves the folder.
Find mail with list_emails (newest first, paged with next_cursor), search_emails or find_similar_emails, read it with get_email and get_thread.
Changes (move_email, copy_email, delete_email, mark_read, mark_unread) are recorded and carried out on the server shortly after;
pass the same request_id again to retry without asking twice, and follow progress with get_mutation.`

// NewHTTPHandler returns the streamable HTTP transport's handler for srv.
// It is stateless, so any replica answers any request, and answers JSON
// rather than event streams. The caller authenticates.
func NewHTTPHandler(srv *mcp.Server) http.Handler {
	return mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return srv }, &mcp.StreamableHTTPOptions{
		Stateless:    true,
		JSONResponse: true,
	})
}

// callTimeout bounds one tool call: its queries and, for a search by
// meaning, the provider's embedding of the query.
const callTimeout = time.Minute

// toolError is a call refused or failed with a message for the caller. Its
// text names ids and settings only, never mail.
type toolError struct{ text string }

func (e *toolError) Error() string { return e.text }

func refusef(format string, args ...any) error { return &toolError{fmt.Sprintf(format, args...)} }

// errUnavailable answers a call whose database work failed: the cause is
// logged by type, and the caller told to try again.
var errUnavailable = &toolError{"the stored mail could not be read or written just now; try again shortly"}

// addTool adds a tool whose handler answers with a count of what it
// returned, and logs and counts each call: the tool's name, the
// transport, the count, the outcome and the duration, nothing else.
func addTool[In, Out any](s *server, srv *mcp.Server, t *mcp.Tool, h func(ctx context.Context, in In) (Out, int, error)) {
	mcp.AddTool(srv, t, func(ctx context.Context, _ *mcp.CallToolRequest, in In) (*mcp.CallToolResult, Out, error) {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		start := time.Now()
		out, n, err := h(ctx, in)
		outcome := "ok"
		var refused *toolError
		switch {
		case err == nil:
		case errors.As(err, &refused):
			outcome = "refused"
		default:
			outcome = "failed"
			s.Logger.WarnContext(ctx, "an MCP tool call failed", slog.String("tool", t.Name),
				slog.String("transport", s.Transport), slog.String("error_type", failure.Name(err)))
			err = errUnavailable
		}
		elapsed := time.Since(start)
		s.Logger.InfoContext(ctx, "mcp tool call", slog.String("tool", t.Name), slog.String("transport", s.Transport),
			slog.String("outcome", outcome), slog.Int("results", n), slog.Duration("duration", elapsed))
		s.Metrics.observe(t.Name, s.Transport, outcome, elapsed)
		return nil, out, err
	})
}
