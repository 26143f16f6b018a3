package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
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
			dbassert.MakeJobsDue(t, b.pool, "account_run", rivertype.JobStateScheduled, rivertype.JobStateRetryable)
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
		_, last := b.checkpointOrZero(t, "INBOX")
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
	validity, last := b.checkpoint(t, "INBOX")
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
		all := dbassert.Jobs(t, b.pool, "")
		byID := make(map[int64]dbassert.Job, len(all))
		for _, j := range all {
			byID[j.ID] = j
		}
		for _, j := range all {
			if j.Kind != kind {
				continue
			}
			state, attempted := string(j.State), j.AttemptedAt
			if carrier, known := byID[j.CarriedBy]; j.CarriedBy != 0 && known {
				if j.State == rivertype.JobStatePending && carrier.State == rivertype.JobStateRunning {
					state = string(rivertype.JobStateRunning)
				}
				if attempted == nil {
					attempted = carrier.AttemptedAt
				}
			}
			if attempted == nil || attempted.Before(p.started) {
				continue
			}
			if ok(state) {
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
	ctx := context.Background()
	jobs, err := dbassert.ReadJobs(ctx, b.pool, "")
	if err != nil {
		return err.Error()
	}
	locks, err := dbassert.ReadHeldAdvisoryLocks(ctx, b.pool)
	if err != nil {
		return err.Error()
	}
	held := map[int64]bool{}
	for _, l := range locks {
		held[l.Key] = true
	}
	clock := func(at *time.Time) string {
		if at == nil {
			return "-"
		}
		return at.Format("15:04:05.000")
	}
	var sb strings.Builder
	fmt.Fprintf(&sb, "  now %s\n", time.Now().Format("15:04:05.000"))
	for _, j := range jobs {
		orphaned := ""
		if j.State == rivertype.JobStateRunning && !held[nsJobLiveness<<48|j.ID] {
			orphaned = "ORPHANED (nobody holds its liveness lock) "
		}
		fmt.Fprintf(&sb, "  %d %s %s attempt=%d attempted_at=%s scheduled_at=%s %s%s\n",
			j.ID, j.Kind, j.State, j.Attempt, clock(j.AttemptedAt), clock(&j.ScheduledAt), orphaned, j.LastError())
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
		pending = dbassert.JobCount(t, b.pool, "folder_pass", rivertype.JobStateAvailable, rivertype.JobStateRunning,
			rivertype.JobStateRetryable, rivertype.JobStateScheduled, rivertype.JobStatePending)
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
func (b *testBundle) checkpointOrZero(t testing.TB, alias string) (uidValidity, lastSeen int64) {
	t.Helper()
	cp, ok := dbassert.LatestCheckpoint(t, b.pool, strings.ToUpper(alias))
	if !ok {
		return 0, 0
	}
	return int64(cp.UIDValidity), int64(cp.LastSeenUID)
}

// requireCheckpointPromise asserts what a checkpoint promises at any
// moment, a crash included: every UID at or below it is stored, with the
// server's bytes, exactly once.
func (b *testBundle) requireCheckpointPromise(t testing.TB, account, alias string, c corpus) {
	t.Helper()
	_, last := b.checkpointOrZero(t, alias)
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
