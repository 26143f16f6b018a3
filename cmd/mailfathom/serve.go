package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/heapgoal"
	"github.com/mailfathom/mailfathom/internal/secret"
	"github.com/mailfathom/mailfathom/internal/service"
)

// loadConfig loads and validates the environment and resolves every secret
// reference once, reporting all problems together on stderr.
func loadConfig(ctx context.Context, environ []string, stderr io.Writer) (*config.Config, *secret.Resolver, bool) {
	cfg, resolver, _, ok := loadConfigAndAnchors(ctx, environ, stderr)
	return cfg, resolver, ok
}

// loadConfigAndAnchors is loadConfig that also returns the trust anchors
// startup loaded, for serve to log.
func loadConfigAndAnchors(ctx context.Context, environ []string, stderr io.Writer) (*config.Config, *secret.Resolver, []service.LoadedAnchor, bool) {
	cfg, err := config.Load(environ)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: invalid configuration:\n%v\n", err)
		return nil, nil, nil, false
	}
	resolver := &secret.Resolver{}
	anchors, err := service.CheckSecrets(ctx, cfg, resolver)
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return nil, nil, nil, false
	}
	return cfg, resolver, anchors, true
}

// newLogger returns the process logger. Durations are written as Go
// duration strings ("1m30s"), the form the configuration takes, rather
// than the JSON handler's nanoseconds.
func newLogger(cfg *config.Config, w io.Writer) *slog.Logger {
	opts := &slog.HandlerOptions{Level: cfg.Log.Level.Slog(), ReplaceAttr: durationsAsText}
	if cfg.Log.Format == config.LogFormatText {
		return slog.New(slog.NewTextHandler(w, opts))
	}
	return slog.New(slog.NewJSONHandler(w, opts))
}

// durationsAsText renders a duration attribute as its Go string.
func durationsAsText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		return slog.String(a.Key, a.Value.Duration().String())
	}
	return a
}

// serveHeapHeadroom is how far serve's heap may grow past its live heap
// before a collection, unless GOGC is set. The live heap is small (one
// MIME payload, a batch's metadata, what each configured account keeps),
// so Go's default of twice it would collect several times a second during
// a synchronization; a fixed headroom collects about as rarely as GOGC=400
// did there, while the account list adds only what it keeps, not five
// times that (measured with the e2e benchmarks).
const serveHeapHeadroom = 48 << 20

func serve(ctx context.Context, environ []string, stdout, stderr io.Writer) int {
	if _, set := os.LookupEnv("GOGC"); !set {
		defer heapgoal.Keep(serveHeapHeadroom).Stop()
	}
	cfg, resolver, anchors, ok := loadConfigAndAnchors(ctx, environ, stderr)
	if !ok {
		return 1
	}
	opts := service.OptionsFromConfig(cfg, resolver)
	opts.Logger = newLogger(cfg, stderr)
	for _, a := range anchors {
		opts.Logger.Info("loaded trust anchor", slog.String("account", a.AccountID),
			slog.String("subject", a.Subject), slog.String("sha256_fingerprint", a.Fingerprint))
	}
	opts.Console = stdout
	if err := service.Run(ctx, opts); err != nil {
		opts.Logger.Error("mailfathom stopped with an error", slog.String("error", err.Error()))
		return 1
	}
	return 0
}

func checkConfig(ctx context.Context, environ []string, stdout, stderr io.Writer) int {
	cfg, _, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	db := "configured database"
	if cfg.Database.Embedded() {
		db = "embedded database"
	}
	fmt.Fprintf(stdout, "configuration is valid: %d account(s), synchronization enabled: %t, %s\n",
		len(cfg.Accounts), cfg.Sync.Enabled, db)
	return 0
}
