package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
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
	dbassert.CreateDatabase(t, admin, "outage")
	admin.Close()

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
	time.Sleep(3 * time.Second) // the outage: the database answers nothing for three seconds
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

	cancelled := dbassert.JobCount(t, b.pool, "", rivertype.JobStateCancelled, rivertype.JobStateDiscarded)
	require.Zero(t, cancelled, "no job was given up:\n%s", jobStates(t, b))
	require.Positive(t, p.count("the process liveness lock is held again"), "the process took its liveness lock again")
	p.stop(t)
}

// countStored counts every stored occurrence, and returns the error of a
// database that does not answer rather than failing the test.
func countStored(b *testBundle) (int, error) {
	c, err := dbassert.ReadCounts(context.Background(), b.pool)
	return c.Occurrences, err
}

// jobStates lists every job for a failure message, and the error of a
// database that does not answer in its place.
func jobStates(t testing.TB, b *testBundle) string {
	jobs, err := dbassert.ReadJobs(context.Background(), b.pool, "")
	if err != nil {
		return err.Error()
	}
	var out string
	for _, j := range jobs {
		errs := strings.Join(j.Errors, " ")
		if len(errs) > 400 {
			errs = errs[len(errs)-400:]
		}
		out += fmt.Sprintf("%d %s %s attempt=%d %s\n", j.ID, j.Kind, j.State, j.Attempt, errs)
	}
	return out
}
