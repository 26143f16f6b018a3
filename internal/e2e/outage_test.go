package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// TestDatabaseOutageDelaysAndResumes stops the PostgreSQL cluster under a
// running first sync for a few seconds and starts it again on the same
// port. The serve process keeps running through the outage; the work that
// failed is attempted again once the database answers (River retries the
// jobs, the process takes its liveness lock again, the sweep hands back the
// jobs whose connections died), and the sync ends with every message of the
// server stored exactly once, nothing \Seen, and no job cancelled.
func TestDatabaseOutageDelaysAndResumes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// A cluster of the test's own, since it is stopped. Not t.TempDir():
	// as root the server runs as "postgres", which must enter the directory.
	dir, err := os.MkdirTemp("", "mailfathom-outage-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	opts := pgcluster.Options{DataDir: filepath.Join(dir, "postgres"), Logf: t.Logf}
	cluster, err := pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = cluster.Stop(context.Background()) })
	opts.Port = cluster.Port()
	admin, err := newPool(cluster.ConnString("postgres"))
	require.NoError(t, err)
	_, err = admin.Exec(ctx, "CREATE DATABASE outage")
	admin.Close()
	require.NoError(t, err)

	b := setup(t, cluster.ConnString("outage"))
	u := b.server.NewUser()
	c := seedCorpus(t, u, "INBOX", 1500, 7, 4)
	b.addAccount(t, "primary", u)
	// Small batches, so the outage falls between commits of a pass.
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "50"
	b.env["MAILFATHOM_SYNC_INTERVAL"] = "10s"
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "10s"
	p := b.start(t, "serve")

	poll.Until(t, 90*time.Second, "the sync got under way", func() (bool, string) {
		n := b.storedCount(t)
		return n >= 200, fmt.Sprintf("%d stored", n)
	})
	before := b.storedCount(t)
	b.pool.Reset()
	require.NoError(t, cluster.Stop(ctx))
	outageStart := time.Now()
	time.Sleep(3 * time.Second)
	require.True(t, p.running(), "the process survives the outage")
	cluster, err = pgcluster.Start(ctx, opts)
	require.NoError(t, err)
	t.Logf("database down for %v with %d of %d messages stored", time.Since(outageStart).Round(time.Millisecond), before, len(c.uids))

	var n int
	poll.Every(t, 50*time.Millisecond, 2*time.Minute, "every message stored after the outage", func() bool {
		n, err = countStored(b)
		return err == nil && n == len(c.uids)
	}, func() string {
		return fmt.Sprintf("%d of %d messages are stored (last error: %v); jobs:\n%s\nlog tail:\n%s",
			n, len(c.uids), err, jobStates(t, b), tailLines(p.rawLog(), 60))
	})
	require.True(t, p.running(), "the process is still serving")
	b.requireStored(t, "primary", "inbox", u, c)
	requireUnseen(t, u, "INBOX", c)

	var cancelled int
	require.NoError(t, b.pool.QueryRow(ctx, `SELECT count(*) FROM river_job WHERE state IN ('cancelled', 'discarded')`).Scan(&cancelled))
	require.Zero(t, cancelled, "no job was given up:\n%s", jobStates(t, b))
	require.Positive(t, p.count("the process liveness lock is held again"), "the process took its liveness lock again")
	p.stop(t)
}

func countStored(b *testBundle) (int, error) {
	var n int
	err := b.pool.QueryRow(context.Background(), `SELECT count(*) FROM stored_emails`).Scan(&n)
	return n, err
}

// jobStates lists every job for a failure message.
func jobStates(t testing.TB, b *testBundle) string {
	rows, err := b.pool.Query(context.Background(), `SELECT id, kind, state, attempt, coalesce(errors::text, '') FROM river_job ORDER BY id`)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var out string
	for rows.Next() {
		var (
			id, attempt int64
			kind, state string
			errs        string
		)
		if err := rows.Scan(&id, &kind, &state, &attempt, &errs); err != nil {
			return err.Error()
		}
		if len(errs) > 400 {
			errs = errs[len(errs)-400:]
		}
		out += fmt.Sprintf("%d %s %s attempt=%d %s\n", id, kind, state, attempt, errs)
	}
	return out
}
