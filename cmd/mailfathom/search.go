package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/mailsearch"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/secret"
)

// searchCmd searches the stored mail of the configured accounts and prints
// the matches to the user who asked: date, account/alias, sender, subject,
// score.
// -mode chooses lexical, semantic or hybrid ranking; the default is hybrid
// with an embedding profile configured and lexical without.
func searchCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("search", flag.ContinueOnError)
	fs.SetOutput(stderr)
	account := fs.String("account", "", "only this account (its configured identifier)")
	alias := fs.String("alias", "", "only this folder alias")
	limit := fs.Int("limit", 20, "at most this many results (up to 500)")
	mode := fs.String("mode", "", "lexical, semantic or hybrid (default: hybrid with an embedding profile, lexical without)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	text := strings.TrimSpace(strings.Join(fs.Args(), " "))
	if text == "" {
		fmt.Fprintln(stderr, `usage: mailfathom search [-mode lexical|semantic|hybrid] [-account ID] [-alias ALIAS] [-limit N] words or "a phrase"`)
		return 2
	}
	m := mailsearch.Mode(strings.ToLower(strings.TrimSpace(*mode)))
	if m != "" && !slices.Contains(mailsearch.Modes, m) {
		fmt.Fprintf(stderr, "mailfathom: -mode must be lexical, semantic or hybrid\n")
		return 2
	}
	cfg, resolver, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	// Only configured accounts' mail is served: say so rather than answer
	// "no matching messages" over mail that is stored.
	if len(cfg.Accounts) == 0 {
		fmt.Fprintln(stderr, "mailfathom: no account is configured, so no mail is served; the same MAILFATHOM_ACCOUNTS_<i>_* variables serve uses (at least MAILFATHOM_ACCOUNTS_0_ID) must be set for search too")
		return 1
	}
	if *account != "" {
		if _, ok := cfg.Account(*account); !ok {
			fmt.Fprintf(stderr, "mailfathom: -account %q is not a configured account; configured: %s\n", *account, configuredIDs(cfg))
			return 1
		}
	}
	if m == mailsearch.Semantic && !cfg.Embedding.Configured() {
		fmt.Fprintf(stderr, "mailfathom: -mode %s needs an embedding profile (MAILFATHOM_EMBEDDING_PROVIDER_URL, _MODEL, _DIMENSIONS); -mode lexical needs none\n", m)
		return 1
	}
	pool, closeDB, ok := openDatabase(ctx, cfg, resolver, stderr)
	if !ok {
		return 1
	}
	defer closeDB()

	searcher, ok := newSearcher(ctx, cfg, resolver, pool, stderr)
	if !ok {
		return 1
	}
	res, err := searcher.Search(ctx, mailsearch.Request{
		Text: text, Mode: m, Account: config.AccountKey(*account), Alias: config.NormalizeAlias(*alias), Limit: *limit})
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		if errors.As(err, new(*mailsearch.ProviderError)) {
			fmt.Fprintln(stderr, "mailfathom: -mode lexical or hybrid searches without the provider")
		}
		return 1
	}
	if res.LexicalOnly != "" {
		fmt.Fprintf(stderr, "mailfathom: ranked by words alone, not by meaning: %s\n", res.LexicalOnly)
	}
	hits := res.Hits
	if len(hits) == 0 {
		fmt.Fprintln(stdout, "no matching messages")
		return 0
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "DATE\tACCOUNT/ALIAS\tFROM\tSUBJECT\tSCORE\tID")
	for _, h := range hits {
		date := "-"
		if h.SentAt != nil {
			date = h.SentAt.UTC().Format("2006-01-02 15:04")
		}
		fmt.Fprintf(w, "%s\t%s/%s\t%s\t%s\t%.4f\t%s\n", date, h.Account, h.Alias, oneLine(h.From, 40), oneLine(h.Subject, 70), h.Score, h.StoredEmailID)
	}
	_ = w.Flush()
	return 0
}

// newSearcher returns the searcher over the configured accounts' served
// mail, under the text search configuration compiled into the index and,
// with an embedding profile, the provider.
func newSearcher(ctx context.Context, cfg *config.Config, resolver *secret.Resolver, pool *pgxpool.Pool, stderr io.Writer) (*mailsearch.Searcher, bool) {
	compiled, err := searchindex.CompiledConfiguration(ctx, pool)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v (has `mailfathom migrate` run?)\n", err)
		return nil, false
	}
	var accounts []string
	for _, a := range cfg.Accounts {
		accounts = append(accounts, config.AccountKey(a.ID))
	}
	// The queries own no transaction: the database pipeline's to repeat
	// when the database is briefly unreachable; the query's embedding runs
	// under the provider's.
	pipelines, err := outbound.NewRegistry(cfg.Resilience, nil, nil)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return nil, false
	}
	searcher := &mailsearch.Searcher{Querier: pool, Registry: pipelines, Configuration: compiled, Accounts: accounts}
	if cfg.Embedding.Configured() {
		searcher.Embedder, err = embedding.NewClient(embedding.Options{
			URL:      cfg.Embedding.ProviderURL,
			Profile:  embedding.Profile{Model: cfg.Embedding.Model, Dimensions: cfg.Embedding.Dimensions},
			APIKey:   cfg.Embedding.APIKey,
			Resolver: resolver,
			Registry: pipelines,
		})
		if err != nil {
			fmt.Fprintf(stderr, "mailfathom: %v\n", err)
			return nil, false
		}
	}
	return searcher, true
}

// configuredIDs lists the configured account ids for a message.
func configuredIDs(cfg *config.Config) string {
	ids := make([]string, len(cfg.Accounts))
	for i, a := range cfg.Accounts {
		ids[i] = a.ID
	}
	return strings.Join(ids, ", ")
}

// oneLine keeps a value on its table row: no control characters, bounded.
func oneLine(s string, n int) string {
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

// reindexSearchCmd rebuilds the search documents' vector under the
// configured MAILFATHOM_PERSISTENCE_TEXT_SEARCH_CONFIGURATION: the remedy
// serve's startup gate names when the two differ.
func reindexSearchCmd(ctx context.Context, environ []string, stdout, stderr io.Writer) int {
	cfg, resolver, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	pool, closeDB, ok := openDatabase(ctx, cfg, resolver, stderr)
	if !ok {
		return 1
	}
	defer closeDB()
	want := cfg.Persistence.TextSearchConfiguration
	have, err := searchindex.CompiledConfiguration(ctx, pool)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return 1
	}
	if have == want {
		fmt.Fprintf(stdout, "search documents are already indexed with %q\n", want)
		return 0
	}
	if err := searchindex.Rebuild(ctx, pool, want); err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return 1
	}
	fmt.Fprintf(stdout, "search documents re-indexed: %q → %q\n", have, want)
	return 0
}
