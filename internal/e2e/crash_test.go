package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// killPoint is where in a serve process's life a kill lands.
type killPoint int

const (
	// killMidPass: a folder pass is running in this process; the kill comes
	// a random moment later, mostly in the middle of a batch (uncommitted
	// writes, an open FETCH), sometimes in a commit or a checkpoint write.
	killMidPass killPoint = iota
	// killAccountRun: the account's run is running in this process (its
	// LIST, its binding and scheduling transaction).
	killAccountRun
	// killBetweenRounds: a round of a pass has committed its checkpoint
	// and the pass goes on to the next over the same session.
	killBetweenRounds
	// killAtStartup: a random moment after exec, before or while the
	// process starts serving.
	killAtStartup
)

// resumeWithin bounds how long a restarted process may take to start
// working the folder again. A kill leaves the killed process's jobs
// "running"; the orphan sweep (package liveness) hands them back once they
// are older than its grace period, on the elected leader's schedule, which
// takes a killed leader's term to expire first: 17–39 s measured. The bound
// catches work that is never handed back, not a slow hand-back.
const resumeWithin = 90 * time.Second

func (k killPoint) String() string {
	return [...]string{"mid-pass", "account run", "between rounds", "startup"}[k]
}

// TestCrashRecoveryRepeatedSIGKILL kills `mailfathom serve` with SIGKILL at
// random points of a large first sync, restarting it against the same
// database each time, and checks that the folder ends up stored exactly
// once, byte for byte, with nothing marked read and the checkpoint at the
// last UID. Between kills it checks the checkpoint's promise: every UID at
// or below it is stored.
func TestCrashRecoveryRepeatedSIGKILL(t *testing.T) {
	// Parallel with the replicas test: most of this test's time is spent
	// waiting for killed work to be handed back, not on the CPUs.
	t.Parallel()
	b := setup(t, dbtest.URL(t))
	user := b.server.NewUser()
	// 5 000 messages of the realistic mix at a quarter of its size (≈ 88 MB):
	// a first sync of several seconds, more than the kills let through.
	const n = 5000
	c := seedCorpus(t, user, "INBOX", n, 11, 4)
	t.Logf("corpus: %s", c)
	requireServerBytes(t, user, c, 0)
	b.addAccount(t, "crash", user)
	// Small batches, so a checkpoint is written every 25 messages, and passes
	// of 1 000 messages: long enough for most kills to land inside one, short
	// enough that the last process ends and continues passes several times.
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "25"
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN"] = "40"

	seed := uint64(time.Now().UnixNano())
	rng := rand.New(rand.NewPCG(seed, 3))
	t.Logf("kill timing seed %d", seed)
	// Most kills land in a folder pass. The cheap ones (startup, an account
	// run made due) follow a kill that left work to recover, so they also
	// probe a restart that is itself interrupted.
	plan := []killPoint{
		killAccountRun, // the first start's: bindings and the first pass not yet committed
		killAtStartup,
		killMidPass, killMidPass, killBetweenRounds, killMidPass,
		killAccountRun, killMidPass, killMidPass, killMidPass,
	}

	begin := time.Now()
	var recoveries []time.Duration
	for i, point := range plan {
		name := fmt.Sprintf("serve-%02d", i)
		var p *serveProc
		var what string
		switch point {
		case killAtStartup:
			p = startServeNoWait(t, name, b.dir, b.env)
			delay := time.Duration(rng.IntN(400)) * time.Millisecond
			time.Sleep(delay)
			what = fmt.Sprintf("%v after exec", delay)
		case killAccountRun:
			// Make the account's next run due now, as its interval would,
			// once the process serves: a start shortly after the last run
			// began holds the run back by the restart grace.
			p = b.start(t, name)
			_, err := b.pool.Exec(t.Context(), `UPDATE river_job SET state = 'available', scheduled_at = now()
				WHERE kind = 'account_run' AND state IN ('scheduled', 'retryable')`)
			require.NoError(t, err)
			b.waitJob(t, p, "account_run", 2*time.Millisecond, resumeWithin, func(state string) bool { return state == "running" })
			delay := time.Duration(rng.IntN(15)) * time.Millisecond
			time.Sleep(delay)
			what = fmt.Sprintf("%v into the account run", delay)
		case killMidPass:
			p = b.start(t, name)
			b.waitJob(t, p, "folder_pass", 5*time.Millisecond, resumeWithin, func(state string) bool { return state == "running" })
			recoveries = append(recoveries, time.Since(p.started))
			delay := time.Duration(20+rng.IntN(380)) * time.Millisecond
			time.Sleep(delay)
			what = fmt.Sprintf("%v into a pass that started %v after exec", delay, recoveries[len(recoveries)-1].Round(time.Millisecond))
		case killBetweenRounds:
			p = b.start(t, name)
			b.waitJob(t, p, "folder_pass", 5*time.Millisecond, resumeWithin, func(state string) bool { return state == "running" })
			recoveries = append(recoveries, time.Since(p.started))
			poll.Every(t, 2*time.Millisecond, time.Minute, "a round of the pass ended", func() bool {
				return p.count("folder pass finished", "more", "true") > 0
			}, func() string { return b.describeJobs(t) })
			what = "as a round of the pass ended and the next began"
		}
		p.kill(t)
		stored := b.storedCount(t)
		_, last := b.checkpointOrZero(t, "crash", "INBOX")
		t.Logf("kill %2d (%s): %s; %d stored, checkpoint %d", i+1, point, what, stored, last)
		require.Less(t, stored, n, "the sync finished before kill %d: the corpus is too small for the plan", i+1)
		b.requireCheckpointPromise(t, "crash", "INBOX", c)
	}
	t.Logf("%d kills in %v; the folder's pass ran again %v after each restart that waited for it",
		len(plan), time.Since(begin).Round(time.Millisecond), recoveries)

	// The last process finishes the folder and stops gracefully.
	p := b.start(t, "serve-final")
	b.waitSynced(t, p, n, 3*time.Minute)
	p.stop(t)

	b.requireStored(t, "crash", "INBOX", user, c)
	validity, last := b.checkpoint(t, "crash", "INBOX")
	require.Equal(t, int64(user.UIDValidity("INBOX")), validity)
	require.Equal(t, int64(c.uids[len(c.uids)-1]), last, "the checkpoint is the last UID")
	requireUnseen(t, user, "INBOX", c)
}

// startServeNoWait is startServe without waiting for the process to serve.
func startServeNoWait(t testing.TB, name, logDir string, env map[string]string) *serveProc {
	t.Helper()
	return startServeWith(t, name, logDir, env, false)
}

// waitJob waits until a job of kind that this process attempted (attempted
// since it started) is in a state ok accepts, polling every every, and
// returns its id. Running jobs of a killed process are not this process's.
// A carried job (pending, naming its carrier) is in its carrier's hands,
// so it counts as running, attempted when its carrier was, while its
// carrier runs.
func (b *testBundle) waitJob(t testing.TB, p *serveProc, kind string, every, timeout time.Duration, ok func(state string) bool) int64 {
	t.Helper()
	var found int64
	gone := func() string {
		return fmt.Sprintf("process running: %t; jobs:\n%s", p.running(), b.describeJobs(t))
	}
	poll.Every(t, every, timeout, fmt.Sprintf("%s: a %s job of this process in the awaited state", p.name, kind), func() bool {
		rows, err := b.pool.Query(t.Context(), `
			SELECT j.id, CASE WHEN j.state = 'pending' AND c.state = 'running' THEN 'running' ELSE j.state::text END
			FROM river_job j LEFT JOIN river_job c ON c.id = (j.metadata->>'carried_by')::bigint
			WHERE j.kind = $1 AND coalesce(j.attempted_at, c.attempted_at) >= $2 ORDER BY j.id`,
			kind, p.started)
		require.NoError(t, err)
		type job struct {
			ID    int64
			State string
		}
		jobs, err := pgx.CollectRows(rows, pgx.RowToStructByPos[job])
		require.NoError(t, err)
		for _, j := range jobs {
			if ok(j.State) {
				found = j.ID
				return true
			}
		}
		if !p.running() {
			t.Fatalf("%s: no %s job of this process reached the awaited state before it exited; %s", p.name, kind, gone())
		}
		return false
	}, gone)
	return found
}

// nsJobLiveness is the namespace of a job's liveness lock (package
// liveness): the high 16 bits of (nsJobLiveness, job id).
const nsJobLiveness = 0x6d06

// describeJobs lists the jobs for a failure message, marking running jobs
// that no live process works: after a kill, River leaves the killed
// process's jobs running, and only the orphan sweep (package liveness)
// hands them back.
func (b *testBundle) describeJobs(t testing.TB) string {
	rows, err := b.pool.Query(context.Background(), `
		SELECT j.id, j.kind, j.state, j.attempt, coalesce(to_char(j.attempted_at, 'HH24:MI:SS.MS'), '-'),
		       to_char(j.scheduled_at, 'HH24:MI:SS.MS'),
		       CASE WHEN j.state = 'running' AND NOT EXISTS (
		           SELECT 1 FROM pg_locks l
		           WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
		             AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
		             AND ((l.classid::bigint << 32) | l.objid::bigint) = ($1::bigint << 48) | j.id)
		       THEN 'ORPHANED (nobody holds its liveness lock) ' ELSE '' END ||
		       coalesce(j.errors[array_length(j.errors, 1)]->>'error', '')
		FROM river_job j ORDER BY j.id`, nsJobLiveness)
	if err != nil {
		return err.Error()
	}
	defer rows.Close()
	var sb strings.Builder
	fmt.Fprintf(&sb, "  now %s\n", time.Now().Format("15:04:05.000"))
	for rows.Next() {
		var (
			id, attempt                   int64
			kind, state, at, sched, lastE string
		)
		if err := rows.Scan(&id, &kind, &state, &attempt, &at, &sched, &lastE); err != nil {
			return err.Error()
		}
		fmt.Fprintf(&sb, "  %d %s %s attempt=%d attempted_at=%s scheduled_at=%s %s\n", id, kind, state, attempt, at, sched, lastE)
	}
	return sb.String()
}

// waitSynced waits until n messages are stored and no folder pass is left
// to run.
func (b *testBundle) waitSynced(t testing.TB, p *serveProc, n int, timeout time.Duration) {
	t.Helper()
	var pending, stored int
	progress := func() string {
		return fmt.Sprintf("%d of %d stored, %d folder passes pending (process running: %t); jobs:\n%s",
			stored, n, pending, p.running(), b.describeJobs(t))
	}
	poll.Every(t, 50*time.Millisecond, timeout, fmt.Sprintf("%s: %d stored and no folder pass pending", p.name, n), func() bool {
		require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM river_job
			WHERE kind = 'folder_pass' AND state IN ('available', 'running', 'retryable', 'scheduled', 'pending')`).Scan(&pending))
		stored = b.storedCount(t)
		if stored >= n && pending == 0 {
			return true
		}
		if !p.running() {
			t.Fatalf("%s: the process exited; %s", p.name, progress())
		}
		return false
	}, progress)
}

// checkpointOrZero is checkpoint, or zeros before the first one.
func (b *testBundle) checkpointOrZero(t testing.TB, account, alias string) (uidValidity, lastSeen int64) {
	t.Helper()
	var n int
	require.NoError(t, b.pool.QueryRow(t.Context(), `SELECT count(*) FROM synchronization_checkpoints`).Scan(&n))
	if n == 0 {
		return 0, 0
	}
	return b.checkpoint(t, account, alias)
}

// requireCheckpointPromise asserts what a checkpoint promises at any
// moment, a crash included: every UID at or below it is stored, with the
// server's bytes, exactly once.
func (b *testBundle) requireCheckpointPromise(t testing.TB, account, alias string, c corpus) {
	t.Helper()
	_, last := b.checkpointOrZero(t, account, alias)
	rows := b.stored(t, account, alias)
	below := 0
	for _, u := range c.uids {
		if int64(u) <= last {
			below++
		}
	}
	got := 0
	for _, r := range rows {
		if r.uid <= last {
			require.Equal(t, int64(c.uids[got]), r.uid, "UIDs at or below the checkpoint %d are stored once each", last)
			require.Equal(t, c.sums[got][:], r.sha, "uid %d", r.uid)
			got++
		}
	}
	require.Equal(t, below, got, "every UID at or below the checkpoint %d is stored", last)
}
