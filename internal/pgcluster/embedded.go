package pgcluster

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
)

// EmbeddedDatabase is the database MailFathom keeps its data in inside the
// embedded cluster.
const EmbeddedDatabase = "mailfathom"

// Embedded is the database MailFathom uses when none is configured: a
// private, durable cluster under a local data directory, listening on a
// unix socket beside it, started from the system's PostgreSQL binaries
// (installed first when missing and the process may do so) and stopped
// with the service.
//
// It is the out-of-the-box default for trying MailFathom on one machine,
// not a production deployment: it has no replication, no backups and no
// remote access.
type Embedded struct {
	cluster *Cluster
	// ConnString connects to EmbeddedDatabase over the cluster's socket.
	ConnString string
}

// EmbeddedSettings are the server settings the embedded cluster runs with
// beyond PostgreSQL's defaults. wal_buffers: a first synchronization
// writes about 70 KB of WAL a message (the raw MIME, its search document
// and passages), and with the default (4 MB, a 32nd of shared_buffers)
// backends found the WAL buffers full 6 000–7 000 times while storing
// 5 000 messages, each time writing WAL themselves; at 16 MB, never, and
// WAL is written in 340 writes instead of 6 600. Measured with the same
// benchmark, wal_compression (few full-page images are written),
// max_wal_size (no checkpoint falls within such a sync) and raw MIME
// stored uncompressed (10 % more WAL, more CPU) did not pay.
var EmbeddedSettings = map[string]string{"wal_buffers": "16MB"}

// StartEmbedded starts (initialising on first use) the cluster under
// dataDir and makes sure EmbeddedDatabase exists in it.
func StartEmbedded(ctx context.Context, dataDir string, logger *slog.Logger) (*Embedded, error) {
	logf := func(format string, args ...any) { logger.InfoContext(ctx, fmt.Sprintf(format, args...)) }
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return nil, fmt.Errorf("embedded database: data directory: %w", err)
	}
	logger.InfoContext(ctx, "starting the embedded PostgreSQL cluster", slog.String("data_dir", abs))
	cluster, err := Start(ctx, Options{DataDir: abs, Durable: true, Logf: logf, Settings: EmbeddedSettings})
	if err != nil {
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	db := &Embedded{cluster: cluster, ConnString: cluster.ConnString(EmbeddedDatabase)}
	if err := ensureDatabase(ctx, cluster.ConnString("postgres")); err != nil {
		_ = cluster.Stop(context.WithoutCancel(ctx))
		return nil, fmt.Errorf("embedded database: %w", err)
	}
	return db, nil
}

// Stop stops the cluster.
func (d *Embedded) Stop(ctx context.Context) error {
	return d.cluster.Stop(ctx)
}

func ensureDatabase(ctx context.Context, adminConnString string) error {
	conn, err := pgx.Connect(ctx, adminConnString)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer conn.Close(context.WithoutCancel(ctx))
	var exists bool
	if err := conn.QueryRow(ctx, "SELECT EXISTS (SELECT 1 FROM pg_database WHERE datname = $1)", EmbeddedDatabase).Scan(&exists); err != nil {
		return fmt.Errorf("look up database: %w", err)
	}
	if exists {
		return nil
	}
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{EmbeddedDatabase}.Sanitize()); err != nil {
		return fmt.Errorf("create database: %w", err)
	}
	return nil
}

// ErrNotRunning is returned by ConnectEmbedded when no server runs on the
// data directory.
var ErrNotRunning = errors.New("pgcluster: no server runs on the data directory")

// ConnectEmbedded returns the connection string of EmbeddedDatabase in the
// cluster a running `serve` started under dataDir (relative to the
// working directory when not absolute), read from the server's own
// postmaster.pid: its socket directory and port. It starts nothing and
// changes nothing in the directory; when no server is ready there it
// returns an error wrapping ErrNotRunning that names the absolute
// directory it looked in.
func ConnectEmbedded(dataDir string) (string, error) {
	abs, err := filepath.Abs(dataDir)
	if err != nil {
		return "", fmt.Errorf("pgcluster: data directory: %w", err)
	}
	notRunning := fmt.Errorf("%w: %s", ErrNotRunning, abs)
	b, err := os.ReadFile(filepath.Join(abs, "postmaster.pid"))
	if errors.Is(err, fs.ErrNotExist) {
		return "", notRunning
	}
	if err != nil {
		return "", fmt.Errorf("pgcluster: read %s: %w", filepath.Join(abs, "postmaster.pid"), err)
	}
	// postmaster.pid: PID, data directory, start time, port, socket
	// directory, listen address, shared memory key, status.
	lines := strings.Split(string(b), "\n")
	if len(lines) < 8 || strings.TrimSpace(lines[7]) != "ready" {
		return "", notRunning
	}
	pid, err := strconv.Atoi(strings.TrimSpace(lines[0]))
	if err != nil || pid <= 0 {
		return "", notRunning
	}
	cwd, err := os.Readlink(fmt.Sprintf("/proc/%d/cwd", pid))
	real, rerr := filepath.EvalSymlinks(abs)
	if err != nil || rerr != nil || cwd != real {
		return "", notRunning // the file outlived its server
	}
	port, err := strconv.Atoi(strings.TrimSpace(lines[3]))
	socketDir := strings.TrimSpace(lines[4])
	if err != nil || socketDir == "" {
		return "", notRunning
	}
	q := url.Values{"host": {socketDir}, "port": {strconv.Itoa(port)}, "sslmode": {"disable"}}
	u := url.URL{Scheme: "postgres", User: url.User("postgres"), Path: "/" + EmbeddedDatabase, RawQuery: q.Encode()}
	return u.String(), nil
}
