package backwardpass_test

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/backwardpass"
	"github.com/mailfathom/mailfathom/internal/forwardpass"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/mimex"
)

// Settings of BenchmarkQuietFolderReconcile.
const (
	// quietMessagesEnv is the folder's size; default 100 000.
	quietMessagesEnv = "MAILFATHOM_BENCH_QUIET_MESSAGES"
	// quietWindowEnv is MaxReconciledEmailsPerRun for the first cycle;
	// default 500, the product's default.
	quietWindowEnv = "MAILFATHOM_BENCH_QUIET_WINDOW"
)

func envInt(tb testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	require.NoError(tb, err, name)
	return n
}

// BenchmarkQuietFolderReconcile stores a large folder written straight into
// Dovecot's Maildir, walks it through one reconciliation cycle with the
// product's window, and then measures a run with nothing changed: a forward
// pass and a backward pass, each on a session of its own as the two jobs
// open them. It reports the most commands any connection of a quiet run
// sent after its EXAMINE, the CPU a quiet run costs this process (the
// passes, the sessions, the driver) and the PostgreSQL backend they use,
// how many runs and how long a flag change and an expunge far from any
// window take to be reflected, and prints the window's two queries under
// EXPLAIN (ANALYZE, BUFFERS) before the cycle (every row never observed)
// and after the quiet runs (every row observed).
//
// It runs only under -bench; see internal/e2e/README.md.
func BenchmarkQuietFolderReconcile(b *testing.B) {
	n := envInt(b, quietMessagesEnv, 100_000)
	window := envInt(b, quietWindowEnv, 500)
	tb := setup(b, nil, 0)
	start := time.Now()
	tb.seed(b, 0, n)
	b.Logf("seeded %d messages into the Maildir in %v", n, time.Since(start).Round(time.Millisecond))

	start = time.Now()
	sess := tb.open(b)
	tb.storeAll(b, sess)
	var stored int
	require.NoError(b, tb.pool.QueryRow(tb.ctx, `SELECT count(*) FROM stored_emails`).Scan(&stored))
	require.Equal(b, n, stored)
	b.Logf("stored %d messages in %v", stored, time.Since(start).Round(time.Millisecond))
	validity := tb.checkpoint(b).UIDValidity
	tb.explain(b, "before the first cycle", validity, window)

	start = time.Now()
	passes := tb.passUntilCycleEnds(b, sess, window, 10*n/window+10)
	cycle := time.Since(start)
	b.Logf("first cycle: %d passes of %d in %v", passes, window, cycle.Round(time.Millisecond))
	require.NoError(b, sess.Close())

	// run is one run of the folder as serve makes it: a forward pass and a
	// backward pass, each on its own session.
	run := func() backwardpass.Report {
		fwd := tb.open(b)
		lim := forwardpass.Limits{BatchSize: 1000, BatchesPerRun: 2, MaxRawMimeBytes: 1 << 20,
			Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000}}
		_, err := forwardpass.Run(tb.ctx, tb.conn, fwd, tb.binding, lim, tb.logger)
		require.NoError(b, err)
		require.NoError(b, fwd.Close())
		bwd := tb.open(b)
		rep := tb.pass(b, bwd, window)
		require.NoError(b, bwd.Close())
		return rep
	}

	backend := tb.backendPID(b)
	quietRuns := 20 * b.N
	var (
		commands          []int
		serveCPU, pgCPU   time.Duration
		elapsed           time.Duration
		beforeS, beforeP  = selfCPU(b), schedCPU(b, backend)
		quietStart        = time.Now()
		narrowedEveryTime = true
	)
	b.ResetTimer()
	for range quietRuns {
		tb.tap.Reset()
		rep := run()
		narrowedEveryTime = narrowedEveryTime && rep.Narrowed && rep.Window == 0
		commands = append(commands, commandsAfterExamine(tb.tap)...)
	}
	b.StopTimer()
	elapsed = time.Since(quietStart)
	serveCPU, pgCPU = selfCPU(b)-beforeS, schedCPU(b, backend)-beforeP
	require.True(b, narrowedEveryTime, "a quiet run after the cycle asks only what changed")
	perRun := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(quietRuns) }
	b.Logf("quiet runs: %d in %v; commands after EXAMINE per connection: %v", quietRuns, elapsed.Round(time.Millisecond), commands[:3])

	// A flag change and an expunge far from where any window stands.
	flagged, expunged := imap.UID(n*3/4), imap.UID(n/3)
	tb.user.SetFlags(folder, flagged, []imap.Flag{imap.FlagFlagged}, nil)
	tb.user.Expunge(folder, expunged)
	changed := time.Now()
	rep := run()
	reflect := time.Since(changed)
	require.Equal(b, `\Flagged`, tb.local(b, flagged), "the flag change is reflected by the next run")
	require.Equal(b, ` [tombstone]`, tb.local(b, expunged), "the expunge is reflected by the next run")
	b.Logf("a flag change and an expunge: reflected by the next run (%s, window %d) in %v", rep.Mode, rep.Window, reflect.Round(time.Millisecond))

	observedMS, neverMS := tb.explain(b, "after the cycle and the quiet runs", validity, window)

	b.ReportMetric(float64(slices.Max(commands)), "max_cmds_after_examine")
	b.ReportMetric(perRun(serveCPU), "serve_cpu_ms/run")
	b.ReportMetric(perRun(pgCPU), "pg_cpu_ms/run")
	b.ReportMetric(perRun(serveCPU+pgCPU), "cpu_ms/run")
	b.ReportMetric(perRun(elapsed), "ms/run")
	b.ReportMetric(float64(reflect.Milliseconds()), "reflect_ms")
	b.ReportMetric(float64(passes), "cycle_passes")
	b.ReportMetric(cycle.Seconds(), "cycle_s")
	b.ReportMetric(observedMS, "window_observed_ms")
	b.ReportMetric(neverMS, "window_never_ms")
	b.ReportMetric(0, "ns/op")
	b.Logf("targets: ≤ 5 commands after EXAMINE %v, ≤ 100 ms CPU per quiet run %v, reflected by the next run true, "+
		"window queries index-only under 5 ms %v",
		slices.Max(commands) <= 5, perRun(serveCPU+pgCPU) <= 100, observedMS < 5 && neverMS < 5)
}

// executionTime reads "Execution Time: x ms" from a plan.
var executionTime = regexp.MustCompile(`Execution Time: ([0-9.]+) ms`)

// explain prints the window's two plans and returns their execution times
// in milliseconds; both must be index-only scans.
func (b *testBundle) explain(tb testing.TB, when string, validity uint32, window int) (observed, never float64) {
	tb.Helper()
	obs, nev, err := mailstore.ExplainReconcileWindow(b.ctx, b.conn, b.binding.ID, validity, window)
	require.NoError(tb, err)
	ms := func(plan string) float64 {
		m := executionTime.FindStringSubmatch(plan)
		require.NotNil(tb, m, plan)
		v, err := strconv.ParseFloat(m[1], 64)
		require.NoError(tb, err)
		return v
	}
	tb.Logf("window plans %s (limit %d):\nobserved group:\n%s\nnever-observed group:\n%s", when, window, obs, nev)
	require.Contains(tb, obs, "Index Only Scan")
	require.Contains(tb, nev, "Index Only Scan")
	return ms(obs), ms(nev)
}

func (b *testBundle) backendPID(tb testing.TB) int {
	var pid int
	require.NoError(tb, b.conn.QueryRow(b.ctx, `SELECT pg_backend_pid()`).Scan(&pid))
	return pid
}

// selfCPU is this process's user and system CPU time.
func selfCPU(tb testing.TB) time.Duration {
	var ru syscall.Rusage
	require.NoError(tb, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// schedCPU is the time process pid has run on a CPU, in nanoseconds, from
// /proc/<pid>/schedstat (finer than the clock ticks of /proc/<pid>/stat).
func schedCPU(tb testing.TB, pid int) time.Duration {
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/schedstat", pid))
	require.NoError(tb, err)
	ns, err := strconv.ParseInt(strings.Fields(string(raw))[0], 10, 64)
	require.NoError(tb, err)
	return time.Duration(ns)
}
