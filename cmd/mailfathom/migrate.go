package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

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
	pool, closeDB, ok := openDatabase(ctx, cfg, resolver, stderr)
	if !ok {
		return 1
	}
	defer closeDB()

	var (
		v   schema.Versions
		err error
	)
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
