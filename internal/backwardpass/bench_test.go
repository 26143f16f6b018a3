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
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
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
// Dovecot's Maildir in its first synchronization, which is the folder's
// first reconciliation cycle, and measures how many windows after it a
// flag change and an expunge on old mail take to be reflected. Then it
// measures a run with nothing changed: a forward pass and a backward pass,
// each on a session of its own as the two jobs open them. It reports the
// most commands any connection of a quiet run sent after its EXAMINE, the
// CPU a quiet run costs this process (the passes, the sessions, the
// driver) and the PostgreSQL backend they use, and how many runs and how
// long a flag change and an expunge far from any window take to be
// reflected. Then it leaves the folder as a version that tracked no
// sequences would have stored it (every row never observed) and walks it
// through a cycle of the backward pass's own with the product's window,
// printing the window's two queries under EXPLAIN (ANALYZE, BUFFERS) with
// every row never observed, mid-cycle and after the cycle, both as the
// passes left the table and vacuumed, as autovacuum would have. Last it
// restarts Dovecot advertising neither CONDSTORE nor QRESYNC and measures
// runs that can only ask window by window. The Dovecot it uses is its own,
// so the load average it logs beside its timings is the only sign of what
// else the machine was doing.
//
// It runs only under -bench; see internal/e2e/README.md.
func BenchmarkQuietFolderReconcile(b *testing.B) {
	n := envInt(b, quietMessagesEnv, 100_000)
	window := envInt(b, quietWindowEnv, 500)
	srv := dovecot.Start(b)
	tb := setup(b, srv, 0)
	b.Logf("load average %s", loadAverage(b))
	start := time.Now()
	tb.seed(b, 0, n)
	b.Logf("seeded %d messages into the Maildir in %v (load average %s)", n, time.Since(start).Round(time.Millisecond), loadAverage(b))

	start = time.Now()
	sess := tb.open(b)
	tb.storeAll(b, sess)
	firstSync := time.Since(start)
	stored, err := mailstore.CountOccurrences(tb.ctx, tb.pool, tb.binding.ID)
	require.NoError(b, err)
	require.EqualValues(b, n, stored)
	b.Logf("first synchronization: stored %d messages in %v (load average %s)", stored, firstSync.Round(time.Millisecond), loadAverage(b))
	cp := tb.checkpoint(b)
	require.NotNil(b, cp.HighestModSeq, "the first synchronization completes the first cycle")
	require.Nil(b, cp.Cycle)
	validity := cp.UIDValidity
	tb.explain(b, "after the first synchronization", validity, window)

	// Old mail changes after the first synchronization: the windows until
	// both changes are reflected.
	oldFlagged, oldExpunged := imap.UID(n/10), imap.UID(n/5)
	tb.user.SetFlags(folder, oldFlagged, []imap.Flag{imap.FlagFlagged}, nil)
	tb.user.Expunge(folder, oldExpunged)
	start = time.Now()
	firstWindows, firstMode := 0, ""
	for tb.local(b, oldFlagged) != `\Flagged` || tb.local(b, oldExpunged) != ` [tombstone]` {
		require.Less(b, firstWindows, 2*n/window+2, "not reflected")
		rep := tb.pass(b, sess, window)
		firstWindows, firstMode = firstWindows+1, rep.Mode
	}
	firstReflect := time.Since(start)
	b.Logf("a flag change on UID %d and an expunge of UID %d after the first synchronization: reflected by window %d (%s) in %v",
		oldFlagged, oldExpunged, firstWindows, firstMode, firstReflect.Round(time.Millisecond))
	require.NoError(b, sess.Close())

	// run is one run of the folder as serve makes it: a forward pass and a
	// backward pass, each on its own session.
	run := func() backwardpass.Report {
		fwd := tb.open(b)
		opts := forwardpass.Options{BatchSize: 1000, BatchesPerRun: 2, MaxRawMimeBytes: 1 << 20,
			Extraction: mimex.Limits{MaxPartCount: 10, MaxNestingDepth: 5, MaxExtractedTextCharacters: 1000}}
		_, err := forwardpass.Run(tb.ctx, tb.conn, fwd, tb.binding, opts, tb.logger)
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
		dovecotCPUUsed    time.Duration
		elapsed           time.Duration
		beforeD           = dovecotCPU(b, srv)
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
	waitReaped(b, srv)
	dovecotCPUUsed = dovecotCPU(b, srv) - beforeD
	require.True(b, narrowedEveryTime, "a quiet run after the cycle asks only what changed")
	perRun := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(quietRuns) }
	b.Logf("quiet runs: %d in %v (load average %s); commands after EXAMINE per connection: %v; Dovecot CPU %.1f ms/run",
		quietRuns, elapsed.Round(time.Millisecond), loadAverage(b), commands[:3], perRun(dovecotCPUUsed))

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

	observedMS, neverMS := tb.explain(b, "after the quiet runs", validity, window)

	// A folder stored before sequences were tracked: its first cycle is
	// the backward pass's. Half the rows are observed after n/window
	// passes, each of which takes half its window from the rows never
	// observed.
	tb.storedBeforeSequences(b)
	tb.vacuum(b)
	tb.explain(b, "stored before sequences, every row never observed", validity, window)
	sess = tb.open(b)
	start = time.Now()
	half := n / window
	for i := 1; i <= half; i++ {
		rep := tb.pass(b, sess, window)
		require.False(b, rep.Narrowed)
		require.NotContains(b, rep.Cycle, "completed", "pass %d", i)
	}
	cycle := time.Since(start)
	midObservedMS, midNeverMS := tb.explain(b, fmt.Sprintf("mid-cycle, after %d passes, as they left the table", half), validity, window)
	tb.vacuum(b)
	midObservedVacuumedMS, midNeverVacuumedMS := tb.explain(b, "mid-cycle, vacuumed", validity, window)
	start = time.Now()
	passes := half + tb.passUntilCycleEnds(b, sess, window, 10*n/window+10)
	cycle += time.Since(start)
	b.Logf("a cycle of the backward pass's own: %d passes of %d in %v (load average %s)", passes, window, cycle.Round(time.Millisecond), loadAverage(b))
	require.NoError(b, sess.Close())
	tb.explain(b, "after the cycle, as the passes left the table", validity, window)
	tb.vacuum(b)
	tb.explain(b, "after the cycle, vacuumed", validity, window)

	// Without CONDSTORE nothing says what changed: every run asks one
	// window, whatever the folder's size.
	srv.RestartWith(dovecot.WithCapability("IMAP4rev1 LITERAL+ SASL-IR AUTH=PLAIN"))
	require.Equal(b, "forgotten", run().Cycle)
	const plainRuns = 10
	var plainCommands []int
	plainRows := 0
	beforeS, beforeP, beforeD = selfCPU(b), schedCPU(b, backend), dovecotCPU(b, srv)
	plainStart := time.Now()
	for range plainRuns {
		tb.tap.Reset()
		rep := run()
		require.False(b, rep.Narrowed)
		require.Equal(b, "FLAGS", rep.Mode)
		require.LessOrEqual(b, rep.Window, window, "without sequences a run costs one window")
		plainRows += rep.Window
		plainCommands = append(plainCommands, commandsAfterExamine(tb.tap)...)
	}
	plainElapsed := time.Since(plainStart)
	plainServe, plainPG := selfCPU(b)-beforeS, schedCPU(b, backend)-beforeP
	waitReaped(b, srv)
	plainDovecot := dovecotCPU(b, srv) - beforeD
	perPlainRun := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / plainRuns }
	b.Logf("without CONDSTORE: %d runs in %v (load average %s), %d rows asked per run, commands after EXAMINE per connection %v, "+
		"CPU per run serve %.1f + PostgreSQL %.1f ms, Dovecot %.1f ms",
		plainRuns, plainElapsed.Round(time.Millisecond), loadAverage(b), plainRows/plainRuns, plainCommands[:3],
		perPlainRun(plainServe), perPlainRun(plainPG), perPlainRun(plainDovecot))

	b.ReportMetric(float64(slices.Max(commands)), "max_cmds_after_examine")
	b.ReportMetric(perRun(serveCPU), "serve_cpu_ms/run")
	b.ReportMetric(perRun(pgCPU), "pg_cpu_ms/run")
	b.ReportMetric(perRun(serveCPU+pgCPU), "cpu_ms/run")
	b.ReportMetric(perRun(elapsed), "ms/run")
	b.ReportMetric(perRun(dovecotCPUUsed), "dovecot_cpu_ms/run")
	b.ReportMetric(float64(reflect.Milliseconds()), "reflect_ms")
	b.ReportMetric(firstSync.Seconds(), "first_sync_s")
	b.ReportMetric(float64(firstWindows), "first_sync_reflect_windows")
	b.ReportMetric(float64(firstReflect.Milliseconds()), "first_sync_reflect_ms")
	b.ReportMetric(float64(passes), "cycle_passes")
	b.ReportMetric(cycle.Seconds(), "cycle_s")
	b.ReportMetric(observedMS, "window_observed_ms")
	b.ReportMetric(neverMS, "window_never_ms")
	b.ReportMetric(midObservedMS, "window_observed_mid_ms")
	b.ReportMetric(midNeverMS, "window_never_mid_ms")
	b.ReportMetric(midObservedVacuumedMS, "window_observed_mid_vacuumed_ms")
	b.ReportMetric(midNeverVacuumedMS, "window_never_mid_vacuumed_ms")
	b.ReportMetric(float64(slices.Max(plainCommands)), "plain_max_cmds_after_examine")
	b.ReportMetric(float64(plainRows/plainRuns), "plain_rows/run")
	b.ReportMetric(perPlainRun(plainServe+plainPG), "plain_cpu_ms/run")
	b.ReportMetric(perPlainRun(plainDovecot), "plain_dovecot_cpu_ms/run")
	b.ReportMetric(0, "ns/op")
	b.Logf("targets: old mail's changes reflected within 2 windows of the first synchronization %v, "+
		"≤ 5 commands after EXAMINE %v, ≤ 100 ms CPU per quiet run %v, reflected by the next run true, "+
		"window queries index-only under 5 ms %v",
		firstWindows <= 2, slices.Max(commands) <= 5, perRun(serveCPU+pgCPU) <= 100,
		max(observedMS, neverMS, midObservedMS, midNeverMS, midObservedVacuumedMS, midNeverVacuumedMS) < 5)
}

// vacuum vacuums and analyzes stored_emails, as autovacuum would have by
// then on a busy table.
func (b *testBundle) vacuum(tb testing.TB) {
	tb.Helper()
	start := time.Now()
	dbassert.VacuumAnalyze(tb, b.pool, "stored_emails")
	tb.Logf("vacuumed stored_emails in %v", time.Since(start).Round(time.Millisecond))
}

// loadAverage is the first three fields of /proc/loadavg.
func loadAverage(tb testing.TB) string {
	raw, err := os.ReadFile("/proc/loadavg")
	require.NoError(tb, err)
	return strings.Join(strings.Fields(string(raw))[:3], " ")
}

// clockTick is the unit of /proc/<pid>/stat's CPU times (USER_HZ, 100 on
// Linux).
const clockTick = 10 * time.Millisecond

// dovecotCPU is the CPU time srv's processes used: its master's, the
// children it has reaped (the imap and imap-login processes of closed
// sessions) and its live children's, in clock ticks.
func dovecotCPU(tb testing.TB, srv *dovecot.Server) time.Duration {
	tb.Helper()
	master, stats := dovecotProcesses(tb, srv)
	ticks := stats[master].own + stats[master].reaped
	for _, st := range stats {
		if st.ppid == master {
			ticks += st.own
		}
	}
	return time.Duration(ticks) * clockTick
}

// waitReaped waits until srv's master has reaped the imap processes of
// the sessions closed last, so that their CPU time counts as its
// children's.
func waitReaped(tb testing.TB, srv *dovecot.Server) {
	tb.Helper()
	poll.Until(tb, 10*time.Second, "the imap processes of the closed sessions exited and were reaped", func() (bool, string) {
		master, stats := dovecotProcesses(tb, srv)
		imap := 0
		for _, st := range stats {
			if st.ppid == master && st.command == "imap" {
				imap++
			}
		}
		return imap == 0, fmt.Sprintf("%d imap processes", imap)
	})
}

// process is what /proc/<pid>/stat says of a process: its parent, its own
// CPU time and its reaped children's, in clock ticks, and its command.
type process struct {
	ppid, own, reaped int64
	command           string
}

// dovecotProcesses reads every process of the machine and returns srv's
// master among them.
func dovecotProcesses(tb testing.TB, srv *dovecot.Server) (master int64, stats map[int64]process) {
	tb.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(tb, err)
	stats = map[int64]process{}
	master = -1
	for _, e := range entries {
		pid, err := strconv.ParseInt(e.Name(), 10, 64)
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue // exited meanwhile
		}
		// The command in parentheses, then the fields after it: state
		// ppid ... utime (12th) stime cutime cstime.
		text := string(raw)
		open, closing := strings.IndexByte(text, '('), strings.LastIndexByte(text, ')')
		f := strings.Fields(text[closing+2:])
		num := func(i int) int64 { v, _ := strconv.ParseInt(f[i], 10, 64); return v }
		stats[pid] = process{ppid: num(1), own: num(11) + num(12), reaped: num(13) + num(14), command: text[open+1 : closing]}
		if cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid)); err == nil &&
			strings.HasSuffix(string(cmd), "\x00-F\x00-c\x00"+srv.ConfigPath()+"\x00") {
			master = pid
		}
	}
	require.NotEqual(tb, int64(-1), master, "Dovecot's master process")
	return master, stats
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
	return dbassert.BackendPID(tb, b.conn)
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
