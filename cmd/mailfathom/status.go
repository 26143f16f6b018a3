package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/workers"
)

// statusCmd prints, per configured account and folder alias, what an
// operator asks first: the same report as GET /api/v1/status.
func statusCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("status", flag.ContinueOnError)
	fs.SetOutput(stderr)
	asJSON := fs.Bool("json", false, "print the report as JSON, as GET /api/v1/status answers")
	if err := fs.Parse(args); err != nil {
		return 2
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
	rep, err := status.Read(ctx, pool, workers.StatusOptions(workers.Dependencies{Config: cfg}))
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v (has `mailfathom migrate` run?)\n", err)
		return 1
	}
	if *asJSON {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		_ = enc.Encode(rep)
		return 0
	}
	if len(rep.Accounts) == 0 {
		fmt.Fprintln(stdout, "no account is configured (MAILFATHOM_ACCOUNTS_0_ID and the rest)")
		return 0
	}
	if !rep.SyncEnabled {
		fmt.Fprintln(stdout, "synchronization is disabled (MAILFATHOM_SYNC_ENABLED=false)")
	}
	if e := rep.Embedding; e != nil {
		fmt.Fprintln(stdout, embeddingLine(e))
	} else {
		fmt.Fprintln(stdout, "embedding: no profile (MAILFATHOM_EMBEDDING_PROVIDER_URL is not set)")
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ACCOUNT/ALIAS\tMODE\tLAST SUCCESS\tNEXT RUN\tSTORED\tOVERSIZED\tWITHHELD\tTOMBSTONED\tCHECKPOINT\tMUTATIONS P/C/D\tAWAITING VECTORS\tLAST FAILURE")
	for _, a := range rep.Accounts {
		next := "none coming"
		if n := a.NextRun; n != nil {
			next = n.Why
			if n.InSeconds > 0 {
				next += " in " + seconds(n.InSeconds)
			}
			if a.ConsecutiveFailures > 0 {
				next += fmt.Sprintf(" (%d failed)", a.ConsecutiveFailures)
			}
		}
		for _, f := range a.Folders {
			last := "never"
			if f.LastSuccessAgeSeconds != nil {
				last = seconds(*f.LastSuccessAgeSeconds) + " ago"
			}
			failure := "-"
			if f.LastFailure != nil {
				failure = f.LastFailure.Identity
			} else if a.LastFailure != nil {
				failure = a.LastFailure.Identity + " (account)"
			}
			awaiting := "-"
			if f.AwaitingVectors != nil {
				awaiting = strconv.FormatInt(*f.AwaitingVectors, 10)
			}
			mode := f.EffectiveMode
			if f.Unresolved != "" {
				// Why nothing watches or synchronizes the folder.
				mode += " (unresolved: " + f.Unresolved + ")"
			}
			m := f.Mutations
			checkpoint := fmt.Sprintf("%d/%d", f.Checkpoint.UIDValidity, f.Checkpoint.LastSeenUID)
			if n := f.Checkpoint.ExaminedUIDNext; n > 0 {
				// How far a synchronization has got: UIDNEXT-1 is the end.
				checkpoint += fmt.Sprintf(" of %d", n-1)
			}
			fmt.Fprintf(w, "%s/%s\t%s\t%s\t%s\t%d\t%d\t%d\t%d\t%s\t%d/%d/%d\t%s\t%s\n", a.ID, f.Alias, mode, last, next,
				f.Messages.Stored, f.Messages.Oversized, f.Messages.Withheld, f.Messages.Tombstoned,
				checkpoint, m.Pending, m.Converging, m.DeadLettered, awaiting, failure)
		}
	}
	_ = w.Flush()
	for _, a := range rep.Accounts {
		if th := a.Throttled; th != nil {
			suggested := ""
			if s := th.SuggestedDelaySeconds; s != nil {
				suggested = ", suggested wait " + seconds(*s)
			}
			fmt.Fprintf(stdout, "%s: throttled by the server until %s (reason %s%s); its work waits, and no failure is counted\n",
				a.ID, th.Until.UTC().Format(time.RFC3339), th.Reason, suggested)
		}
		if b := a.DownloadBudget; b != nil {
			fmt.Fprintf(stdout, "%s: download budget %s of %s used in the last %d h", a.ID, status.Bytes(b.UsedBytes), status.Bytes(b.BytesPerDay), b.WindowHours)
			if b.ContinuesAt != nil {
				fmt.Fprintf(stdout, "; reached, downloading continues at %s", b.ContinuesAt.UTC().Format(time.RFC3339))
			}
			fmt.Fprintln(stdout)
		}
	}
	for _, a := range rep.Accounts {
		if n := a.RefusedPassages; n != nil && *n > 0 {
			fmt.Fprintf(stdout, "%s: %d passage(s) refused by the embedding provider; they are not offered again until their text changes\n", a.ID, *n)
		}
	}
	for _, a := range rep.Accounts {
		if c := a.Compression; c != nil {
			fmt.Fprintf(stdout, "%s: compression %s (%s)\n", a.ID, map[bool]string{true: "on", false: "off"}[c.InUse], c.Reason)
		}
	}
	for _, a := range rep.Accounts {
		if n := a.Mutations.CompletedUnjoined; n > 0 {
			fmt.Fprintf(stdout, "%s: %d move(s) or copy(ies) completed, unjoined: the server named no placement\n", a.ID, n)
		}
		if m := a.LastFailedMutation; m != nil {
			fmt.Fprintf(stdout, "%s: last failed mutation %s (%s, %s), failure code %s at %s\n",
				a.ID, m.ID, m.Kind, m.State, m.FailureCode, m.At.UTC().Format(time.RFC3339))
		}
	}
	return 0
}

// seconds renders a number of seconds as a Go duration, whole seconds,
// without trailing zero units ("1m", "1h30m", "45s").
func seconds(s float64) string {
	d := (time.Duration(s) * time.Second).Round(time.Second).String()
	if strings.HasSuffix(d, "m0s") {
		d = strings.TrimSuffix(d, "0s")
	}
	if strings.HasSuffix(d, "h0m") {
		d = strings.TrimSuffix(d, "0m")
	}
	return d
}

// embeddingLine is the status line of the active embedding profile: its
// configured identity, the model its vectors are of once an answer named
// one, and its backlog.
func embeddingLine(e *status.Embedding) string {
	answered := ""
	if e.AnsweredModel != "" {
		answered = "; vectors of model " + e.AnsweredModel + ", as the provider answered"
	}
	return fmt.Sprintf("embedding %s (%d dimensions%s): %d embed jobs waiting, %d messages awaiting vectors, %d passages refused by the provider",
		e.Model, e.Dimensions, answered, e.BacklogJobs, e.AwaitingMessages, e.RefusedPassages)
}
