package main

import (
	"context"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
)

// A command other than serve connects to the embedded database the
// running serve started — the data directory given relative to the working
// directory or absolute — and never starts one of its own; with none
// running it says where it looked and which variable points elsewhere.
func TestCommandsUseTheRunningEmbeddedDatabase(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dir, err := os.MkdirTemp("", "mailfathom-cmd-")
	require.NoError(t, err)
	require.NoError(t, os.Chmod(dir, 0o755))
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	dataDir := filepath.Join(dir, "postgres")
	cwd, err := os.Getwd()
	require.NoError(t, err)
	relative, err := filepath.Rel(cwd, dataDir)
	require.NoError(t, err)
	env := []string{"MAILFATHOM_EMBEDDED_DATA_DIR=" + relative}

	code, _, stderr := runCmd(t, env, "migrate", "-check")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no embedded database is running in "+dataDir)
	require.Contains(t, stderr, "MAILFATHOM_EMBEDDED_DATA_DIR")
	_, err = os.Stat(dataDir)
	require.ErrorIs(t, err, os.ErrNotExist, "nothing was started")

	// What serve does first.
	db, err := pgcluster.StartEmbedded(ctx, dataDir, slog.New(slog.NewTextHandler(io.Discard, nil)))
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Stop(context.Background()) })
	conn, err := pgx.Connect(ctx, db.ConnString)
	require.NoError(t, err)
	walBuffers := dbassert.Setting(t, conn, "wal_buffers")
	require.NoError(t, conn.Close(ctx))
	require.Equal(t, pgcluster.EmbeddedSettings["wal_buffers"], walBuffers, "the embedded cluster runs with its own settings")

	code, stdout, stderr := runCmd(t, env, "migrate")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "schema")
	account := append(env, "MAILFATHOM_ACCOUNTS_0_ID=primary", "MAILFATHOM_ACCOUNTS_0_HOST=imap.example.test",
		"MAILFATHOM_ACCOUNTS_0_USERNAME=u", "MAILFATHOM_ACCOUNTS_0_PASSWORD=env:HOME")
	code, stdout, stderr = runCmd(t, account, "search", "anything")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "no matching messages")
	code, stdout, stderr = runCmd(t, account, "status")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "primary/INBOX")
	code, stdout, stderr = runCmd(t, account, "mutations")
	require.Equal(t, 0, code, stderr)
	require.Contains(t, stdout, "no mutations")
	code, _, stderr = runCmd(t, account, "mutate", "mark-read", "0190b5a8-0000-7000-8000-000000000000")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "[EmailUnknown]", "answered from the database, not refused for want of one")

	require.NoError(t, db.Stop(ctx))
	code, _, stderr = runCmd(t, []string{"MAILFATHOM_EMBEDDED_DATA_DIR=" + dataDir}, "migrate", "-check")
	require.Equal(t, 1, code)
	require.Contains(t, stderr, "no embedded database is running in "+dataDir)
}
