package main

import (
	"context"
	"fmt"
	"io"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mcpserver"
	"github.com/mailfathom/mailfathom/workers"
)

// mcpCmd serves the stored mail to an AI assistant over the Model Context
// Protocol on stdin and stdout, until the assistant closes stdin. stdout
// carries the protocol's messages only; every log line goes to stderr. It
// connects to the database like the other commands and records changes
// for a serving process to carry out; it runs no jobs itself.
func mcpCmd(ctx context.Context, args, environ []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 0 {
		fmt.Fprintln(stderr, "usage: mailfathom mcp   (speaks MCP on stdin and stdout; configured by the MAILFATHOM_ environment)")
		return 2
	}
	cfg, resolver, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	logger := newLogger(cfg, stderr)
	pool, closeDB, ok := openDatabase(ctx, cfg, resolver, stderr)
	if !ok {
		return 1
	}
	defer closeDB()
	searcher, ok := newSearcher(ctx, cfg, resolver, pool, stderr)
	if !ok {
		return 1
	}
	inserter, err := jobqueue.NewInsertClient(pool)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return 1
	}
	srv, err := mcpserver.New(mcpserver.Options{
		Pool: pool, Config: cfg, Searcher: searcher, Inserter: inserter,
		Status:    workers.StatusOptions(workers.Dependencies{Config: cfg}),
		Transport: mcpserver.TransportStdio, Logger: logger,
	})
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return 1
	}
	if len(cfg.Accounts) == 0 {
		logger.WarnContext(ctx, "no account is configured, so no mail is served; the same MAILFATHOM_ACCOUNTS_<i>_* variables serve uses must be set for mcp too")
	}
	logger.InfoContext(ctx, "serving MCP over stdio", "accounts", len(cfg.Accounts))
	err = srv.Run(ctx, &mcp.IOTransport{Reader: io.NopCloser(stdin), Writer: nopWriteCloser{stdout}})
	if err != nil && ctx.Err() == nil {
		logger.ErrorContext(ctx, "the MCP session ended with an error", "error_type", failure.Name(err))
		return 1
	}
	logger.InfoContext(ctx, "the MCP client closed the session")
	return 0
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
