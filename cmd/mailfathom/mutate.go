package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/google/uuid"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
)

const mutateUsage = `usage: mailfathom mutate [-request-id KEY] move|copy|delete|mark-read|mark-unread EMAIL_ID [DESTINATION_ALIAS]`

// mutateCmd asks for one change to one stored email: it is recorded, with
// its first stage's job, and a serving process carries it out. It prints
// the mutation's id and state.
func mutateCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	requestID := fs.String("request-id", "", "the identity of this request: asking again with the same key performs one change (default: a new one)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	rest := fs.Args()
	if len(rest) < 2 || len(rest) > 3 {
		fmt.Fprintln(stderr, mutateUsage)
		return 2
	}
	id, err := uuid.Parse(rest[1])
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: EMAIL_ID must be the id `mailfathom search` prints\n%s\n", mutateUsage)
		return 2
	}
	req := mutation.Request{EmailID: id, Kind: rest[0], RequestID: *requestID}
	if len(rest) == 3 {
		req.DestinationAlias = rest[2]
	}
	cfg, resolver, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	pool, closeDB, ok := openDatabase(ctx, cfg, resolver, stderr)
	if !ok {
		return 1
	}
	defer closeDB()
	client, err := jobqueue.NewInsertClient(pool)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return 1
	}
	m, created, err := mutation.Record(ctx, pool, cfg, client, req)
	var refusal *mutation.RequestError
	switch {
	case errors.As(err, &refusal):
		fmt.Fprintf(stderr, "mailfathom: refused: %v; nothing was recorded\n", refusal)
		return 1
	case err != nil:
		fmt.Fprintf(stderr, "mailfathom: %v (has `mailfathom migrate` run?)\n", err)
		return 1
	}
	v := mutation.ViewOf(m)
	note := "recorded"
	if !created {
		note = "already recorded under this request id"
	}
	fmt.Fprintf(stdout, "%s\t%s\t%s\n", v.ID, v.State, note)
	return 0
}

// mutationsCmd lists mailbox mutations, newest first. A move or copy the
// server carried without naming the placement reads "completed,
// unjoined" in the STATE column.
func mutationsCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("mutations", flag.ContinueOnError)
	fs.SetOutput(stderr)
	account := fs.String("account", "", "only this account (its configured identifier)")
	state := fs.String("state", "", "only this state: pending, converging, completed or dead-lettered")
	limit := fs.Int("limit", 100, "at most this many (up to 1000)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *limit < 1 || *limit > 1000 {
		fmt.Fprintln(stderr, "usage: mailfathom mutations [-account ID] [-state pending|converging|completed|dead-lettered] [-limit N]")
		return 2
	}
	filter := mailstore.MutationFilter{Limit: *limit}
	if *state != "" {
		st, ok := mutation.States[strings.ToLower(strings.TrimSpace(*state))]
		if !ok {
			fmt.Fprintln(stderr, "mailfathom: -state must be pending, converging, completed or dead-lettered")
			return 2
		}
		filter.State = st
	}
	cfg, resolver, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	if *account != "" {
		if _, ok := cfg.Account(*account); !ok {
			fmt.Fprintf(stderr, "mailfathom: -account %q is not a configured account; configured: %s\n", *account, configuredIDs(cfg))
			return 1
		}
		filter.AccountKey = config.AccountKey(*account)
	}
	pool, closeDB, ok := openDatabase(ctx, cfg, resolver, stderr)
	if !ok {
		return 1
	}
	defer closeDB()
	list, err := mailstore.ListMutations(ctx, pool, filter)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v (has `mailfathom migrate` run?)\n", err)
		return 1
	}
	if len(list) == 0 {
		fmt.Fprintln(stdout, "no mutations")
		return 0
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "RECORDED\tID\tACCOUNT\tKIND\tFROM\tTO\tSTATE\tSTAGE\tATTEMPTS\tCODE\tEMAIL_ID")
	for _, m := range list {
		v := mutation.ViewOf(m)
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", v.RecordedAt.Format("2006-01-02 15:04"), v.ID, v.Account, v.Kind,
			v.SourceAlias, dash(v.DestinationAlias), v.Summary, v.Stage, v.Attempts, dash(v.FailureCode), v.EmailID)
	}
	_ = w.Flush()
	return 0
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
