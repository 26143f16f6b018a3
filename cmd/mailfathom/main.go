// Command mailfathom keeps a read-only, searchable copy of IMAP mailboxes in
// PostgreSQL.
//
// Usage:
//
//	mailfathom serve           run the service
//	mailfathom migrate         apply the schema and River migrations
//	mailfathom migrate -check  report the migration versions; exit 1 if behind
//	mailfathom search WORDS    search the stored mail of the configured accounts
//	mailfathom reindex-search  rebuild the search index under the configured text search configuration
//	mailfathom embeddings prune  remove the vectors of embedding profiles no longer active
//	mailfathom status          each account's and folder's synchronization status
//	mailfathom mutate KIND ID  ask for a change to one stored email (move, copy, delete, mark-read, mark-unread)
//	mailfathom mutations       list the changes asked for and where each stands
//	mailfathom mcp             serve the stored mail to an AI assistant over MCP (stdio)
//	mailfathom check-config    validate the MAILFATHOM_ environment
//	mailfathom probe URL       exit 0 when URL answers 200 OK
//
// Every setting is a MAILFATHOM_ environment variable; README.md lists them.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	stopWithGoRun()
	code := run(ctx, os.Args[1:], os.Environ(), os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

const usage = `usage: mailfathom <command>

commands:
  serve            run the service (migrations, River workers, River UI, /metrics, /healthz, /readyz)
  migrate [-check] apply (or with -check only report) the schema and River migrations
  search [-account ID] [-alias ALIAS] [-limit N] WORDS
                   search the stored mail of the configured accounts
  reindex-search   rebuild the search index under MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION
  embeddings prune [-batch N]
                   remove the vectors of every embedding profile but the configured one, N a transaction
  status [-json]   each account's and folder alias's synchronization status
  mutate [-request-id KEY] move|copy|delete|mark-read|mark-unread EMAIL_ID [DESTINATION_ALIAS]
                   ask for a change to one stored email (EMAIL_ID as search prints it)
  mutations [-account ID] [-state pending|converging|completed|dead-lettered]
                   list the mailbox changes asked for and where each stands
  mcp              serve the stored mail to an AI assistant over the Model Context Protocol on stdin/stdout
  check-config     validate the MAILFATHOM_ environment variables and report every problem
  probe URL        exit 0 when URL answers 200 OK (container health checks)
`

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "serve":
		return serve(ctx, environ, stdout, stderr)
	case "migrate":
		return migrateCmd(ctx, args[1:], environ, stdout, stderr)
	case "check-config":
		return checkConfig(ctx, environ, stdout, stderr)
	case "search":
		return searchCmd(ctx, args[1:], environ, stdout, stderr)
	case "reindex-search":
		return reindexSearchCmd(ctx, environ, stdout, stderr)
	case "embeddings":
		return embeddingsCmd(ctx, args[1:], environ, stdout, stderr)
	case "status":
		return statusCmd(ctx, args[1:], environ, stdout, stderr)
	case "mutate":
		return mutateCmd(ctx, args[1:], environ, stdout, stderr)
	case "mutations":
		return mutationsCmd(ctx, args[1:], environ, stdout, stderr)
	case "mcp":
		return mcpCmd(ctx, args[1:], environ, os.Stdin, stdout, stderr)
	case "probe":
		return probe(ctx, args[1:], stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "mailfathom: unknown command %q\n\n%s", args[0], usage)
		return 2
	}
}
