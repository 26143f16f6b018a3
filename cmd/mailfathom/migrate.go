package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/mailfathom/mailfathom/internal/database"
	"github.com/mailfathom/mailfathom/internal/embeddeddb"
	"github.com/mailfathom/mailfathom/internal/service"
	"github.com/mailfathom/mailfathom/schema"
)

func migrateCmd(ctx context.Context, args, environ []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("migrate", flag.ContinueOnError)
	fs.SetOutput(stderr)
	check := fs.Bool("check", false, "report the versions without applying anything; exit 1 when either schema is behind")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	cfg, resolver, ok := loadConfig(ctx, environ, stderr)
	if !ok {
		return 1
	}
	logger := newLogger(cfg, stderr)
	opts := service.OptionsFromConfig(cfg, resolver)

	connString := opts.DatabaseConnString
	if connString == "" {
		db, err := embeddeddb.Start(ctx, opts.EmbeddedDataDir, logger)
		if err != nil {
			fmt.Fprintf(stderr, "mailfathom: %v\n", err)
			return 1
		}
		defer func() { _ = db.Stop(context.WithoutCancel(ctx)) }()
		connString = db.ConnString
	}
	pool, err := database.Open(ctx, database.Options{ConnString: connString, Password: opts.DatabasePassword, MaxConns: 4})
	if err != nil {
		fmt.Fprintf(stderr, "mailfathom: %v\n", err)
		return 1
	}
	defer pool.Close()

	var v schema.Versions
	if *check {
		v, err = schema.Status(ctx, pool)
	} else {
		v, err = schema.Migrate(ctx, pool, logger)
	}
	if err != nil {
		logger.Error("migration failed", slog.String("error", err.Error()))
		return 1
	}
	fmt.Fprintf(stdout, "%s\n", v)
	if !v.Current() {
		fmt.Fprintln(stdout, "the database is behind this binary: run `mailfathom migrate`")
		return 1
	}
	return 0
}
