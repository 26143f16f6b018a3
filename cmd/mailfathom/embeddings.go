package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/mailfathom/mailfathom/internal/searchindex"
)

// embeddingsUsage is the embeddings command's usage line.
const embeddingsUsage = "usage: mailfathom embeddings prune [-batch N]"

// embeddingsCmd runs the embeddings subcommands. prune removes the vectors
// of every embedding profile other than the configured one — a model or
// dimensions changed since they were computed, which no search reads — in
// transactions of at most -batch vectors each, then the profiles' records
// and vector indexes. It keeps the configured profile's vectors whether
// or not any exist yet, and refuses to run without one configured, since
// every profile would then be removed. It can run beside serve.
func embeddingsCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	if len(args) == 0 || args[0] != "prune" {
		fmt.Fprintln(stderr, embeddingsUsage)
		return 2
	}
	fs := flag.NewFlagSet("embeddings prune", flag.ContinueOnError)
	fs.SetOutput(stderr)
	batch := fs.Int("batch", 10_000, "vectors removed per transaction, 1 to 100000")
	if err := fs.Parse(args[1:]); err != nil {
		return 2
	}
	if fs.NArg() != 0 || *batch < 1 || *batch > 100_000 {
		fmt.Fprintln(stderr, embeddingsUsage+"   (-batch from 1 to 100000)")
		return 2
	}
	cfg, resolver, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	if !cfg.Embedding.Configured() {
		fmt.Fprintln(stderr, "mailfathom: embeddings prune keeps the active embedding profile's vectors and removes every other's; "+
			"no profile is configured (MAILFATHOM_EMBEDDING_PROVIDER_URL, _MODEL, _DIMENSIONS), so it would remove them all: configure the one to keep")
		return 1
	}
	pool, closeDB, ok := openDatabase(ctx, cfg, resolver, stderr)
	if !ok {
		return 1
	}
	defer closeDB()
	profiles, err := searchindex.Profiles(ctx, pool)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return 1
	}
	pruned := 0
	for _, p := range profiles {
		if p.Model == cfg.Embedding.Model && p.Dimensions == cfg.Embedding.Dimensions {
			fmt.Fprintf(stdout, "kept profile %d (%s, %d dimensions): the active one\n", p.ID, p.Model, p.Dimensions)
			continue
		}
		removed, batches := 0, 0
		for {
			n, err := searchindex.PruneVectors(ctx, pool, p.ID, *batch)
			if err != nil {
				fmt.Fprintf(stderr, "mailfathom: %v (profile %d: %d vectors removed so far; run prune again to go on)\n", err, p.ID, removed)
				return 1
			}
			if n == 0 {
				break
			}
			removed += n
			if batches++; batches%100 == 0 {
				fmt.Fprintf(stdout, "profile %d: %d vectors removed so far\n", p.ID, removed)
			}
		}
		if err := searchindex.DropProfile(ctx, pool, p.ID); err != nil {
			fmt.Fprintf(stderr, "mailfathom: %v (profile %d: its %d vectors are removed; run prune again)\n", err, p.ID, removed)
			return 1
		}
		fmt.Fprintf(stdout, "removed profile %d (%s, %d dimensions): %d vectors\n", p.ID, p.Model, p.Dimensions, removed)
		pruned++
	}
	if pruned == 0 {
		fmt.Fprintln(stdout, "no inactive embedding profile: nothing to prune")
	}
	return 0
}
