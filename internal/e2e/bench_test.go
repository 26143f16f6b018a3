package e2e

import (
	"cmp"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// slowLink is the path of MAILFATHOM_BENCH_LINK=slow: 20 ms each way and
// 100 Mbit/s each way, a mail server across a continent.
var slowLink = faultproxy.Link{Latency: 20 * time.Millisecond, BytesPerSecond: 100_000_000 / 8}

// First-synchronization targets on the 2-core reference machine, for the
// realistic corpus.
const (
	targetMessagesPerSecond = 650
	rssBudget               = 145 << 20
	targetPostgresCPU       = 1100 * time.Microsecond // per message
	targetServeCPU          = 700 * time.Microsecond  // per message
	targetCoresBusy         = 0.9                     // of both cores, all three processes
)

// BenchmarkFirstSync measures a full first synchronization of one folder by
// `mailfathom serve` over TLS: from starting the process until every
// message is stored, the process's peak RSS, and the CPU time the service,
// PostgreSQL and Dovecot spent on it. It runs on demand only:
//
//	go test -run '^$' -bench FirstSync -benchtime 1x ./internal/e2e
//
// MAILFATHOM_BENCH_MESSAGES sets the corpus size (default 5000, ≈ 350 MB).
// MAILFATHOM_BENCH_CORPUS picks the corpus: realistic (the default,
// mailgen.Realistic's mix of kinds, its size tail in attachments) or prose
// (every message text up to 64 KB, the worst case for indexing).
// When mbsync is installed, it pulls the same folder in the same run, with
// its defaults and with COMPRESS disabled, for comparison.
// MAILFATHOM_BENCH_EMBEDDING=hang|healthy adds an embedding profile;
// compare alternates runs with a hanging provider and without a profile.
// MAILFATHOM_BENCH_DURABLE=false uses the tests' non-durable PostgreSQL
// (fsync off, on tmpfs) instead of a durable cluster on disk like the
// embedded default's. MAILFATHOM_BENCH_STATEMENTS=N (durable cluster only)
// loads pg_stat_statements and prints the N statements that took the most
// time in each run. Without compare, serve runs with its default
// compression (auto). MAILFATHOM_BENCH_COMPRESSION=compare runs every
// iteration twice, with MAILFATHOM_ACCOUNTS_0_COMPRESSION=on and with
// MAILFATHOM_ACCOUNTS_0_COMPRESSION=off, each into a fresh
// database, and reports the second as nocompress_*. MAILFATHOM_BENCH_LINK=slow
// puts faultproxy between Dovecot and both serve and mbsync, shaped like a
// long, narrow path (slowLink: 20 ms each way, 100 Mbit/s each way), and
// implies compare. README.md explains the figures.
func BenchmarkFirstSync(b *testing.B) {
	n := 5000
	if v := os.Getenv("MAILFATHOM_BENCH_MESSAGES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, "MAILFATHOM_BENCH_MESSAGES")
		require.Positive(b, n, "MAILFATHOM_BENCH_MESSAGES")
	}
	durable := os.Getenv("MAILFATHOM_BENCH_DURABLE") != "false"
	statements := 0
	if v := os.Getenv("MAILFATHOM_BENCH_STATEMENTS"); v != "" {
		var err error
		statements, err = strconv.Atoi(v)
		require.NoError(b, err, "MAILFATHOM_BENCH_STATEMENTS")
		require.True(b, durable, "MAILFATHOM_BENCH_STATEMENTS needs the durable cluster")
	}
	slow := false
	switch link := os.Getenv("MAILFATHOM_BENCH_LINK"); link {
	case "", "loopback":
	case "slow":
		slow = true
	default:
		b.Fatalf("MAILFATHOM_BENCH_LINK=%q: want slow or loopback", link)
	}
	compare := slow
	switch v := os.Getenv("MAILFATHOM_BENCH_COMPRESSION"); v {
	case "":
	case "compare":
		compare = true
	default:
		b.Fatalf("MAILFATHOM_BENCH_COMPRESSION=%q: want compare or unset", v)
	}
	generate := func(i int) []byte { return mailgen.Realistic(42, i) }
	switch kind := cmp.Or(os.Getenv("MAILFATHOM_BENCH_CORPUS"), "realistic"); kind {
	case "realistic":
	case "prose":
		rng := rand.New(rand.NewPCG(42, 7))
		generate = func(i int) []byte { return mailgen.Message(42, i, max(1, mailgen.ReferenceSize(rng))) }
	default:
		b.Fatalf("MAILFATHOM_BENCH_CORPUS=%q: want realistic or prose", kind)
	}

	// The mailbox is seeded once; each iteration synchronizes it into a
	// fresh database.
	newDatabase := benchDatabases(b, durable, statements > 0)
	bundle := setup(b, newDatabase())
	user := bundle.server.NewUser()
	seedStart := time.Now()
	c := seedMessages(b, user, "INBOX", n, generate)
	b.Logf("corpus: %s; seeded in %v", c, time.Since(seedStart).Round(time.Millisecond))
	requireServerBytes(b, user, c, n/2)
	bundle.addAccount(b, "bench", user)
	imapPort := bundle.server.TLSPort()
	var proxy *faultproxy.Proxy
	// onWire says how many bytes the server sent through the slow link
	// since the last call: what compression saved.
	var lastDown int64
	onWire := func() string {
		if proxy == nil {
			return ""
		}
		down := proxy.Stats().ServerToClient
		defer func() { lastDown = down }()
		return fmt.Sprintf("; %.1f MB from the server on the link", float64(down-lastDown)/1e6)
	}
	if slow {
		p := faultproxy.Start(b, bundle.server.TLSAddr())
		proxy = p
		p.Shape(faultproxy.Both, slowLink)
		imapPort = portOf(b, p.Addr())
		bundle.env["MAILFATHOM_ACCOUNTS_0_HOST"] = "127.0.0.1"
		bundle.env["MAILFATHOM_ACCOUNTS_0_PORT"] = strconv.Itoa(imapPort)
		b.Logf("link: %v each way, %d Mbit/s each way (faultproxy)", slowLink.Latency, slowLink.BytesPerSecond*8/1e6)
	}
	// MAILFATHOM_BENCH_EMBEDDING=hang configures an embedding profile whose
	// provider never answers, healthy one that does: the first sync's cost
	// of passages and offers, against the same sync without (unset).
	// compare alternates the two in one process — even runs with the
	// hanging provider, odd runs without a profile — so that both see the
	// same machine, and reports how much longer the first take.
	mode := os.Getenv("MAILFATHOM_BENCH_EMBEDDING")
	var profileEnv map[string]string
	switch mode {
	case "":
	case "hang", "healthy", "compare":
		provider := bundle.withEmbedding(b, embedtest.Options{})
		if mode != "healthy" {
			provider.SetFault(embedtest.Fault{Kind: embedtest.Hang})
		}
		profileEnv = map[string]string{}
		for k, v := range bundle.env {
			if strings.HasPrefix(k, "MAILFATHOM_EMBEDDING_") {
				profileEnv[k] = v
			}
		}
	default:
		b.Fatalf("MAILFATHOM_BENCH_EMBEDDING must be hang, healthy, compare or unset")
	}
	// Default synchronization settings, but for a short interval.
	bundle.env["MAILFATHOM_SYNC_INTERVAL"] = "10s"
	bundle.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "10s"
	if os.Getenv("MAILFATHOM_BENCH_KEEPLOG") != "" {
		bundle.env["MAILFATHOM_LOG_LEVEL"] = "debug"
	}
	binary(b) // built before the clock starts

	var total, plain benchRun
	var withProfile, withoutProfile benchRun
	// Without compare, serve runs with its own default (auto), reported
	// as the main figures.
	variants := []bool{true}
	if compare {
		variants = append(variants, false)
	}
	runs := 0
	b.ResetTimer()
	for i := range b.N {
		for _, compress := range variants {
			b.StopTimer()
			delete(bundle.env, "MAILFATHOM_ACCOUNTS_0_COMPRESSION")
			if compare {
				bundle.env["MAILFATHOM_ACCOUNTS_0_COMPRESSION"] = map[bool]string{true: "on", false: "off"}[compress]
			}
			profiled := mode != "" && (mode != "compare" || i%2 == 0)
			for k, v := range profileEnv {
				if profiled {
					bundle.env[k] = v
				} else {
					delete(bundle.env, k)
				}
			}
			runs++
			if runs > 1 {
				bundle.dbURL = newDatabase()
				bundle.env["MAILFATHOM_DATABASE_URL"] = bundle.dbURL
				bundle.pool.Close()
				var err error
				bundle.pool, err = newPool(bundle.dbURL)
				require.NoError(b, err)
			}
			// Migrate before the clock starts: serve then finds the schema
			// current, as in any start but the first.
			migrate(b, bundle.dbURL)
			meter, err := newCPUMeter(dbassert.Setting(b, bundle.pool, "data_directory"), bundle.server.Dir())
			require.NoError(b, err)
			if statements > 0 {
				dbassert.ResetStatementStatistics(b, bundle.pool)
			}
			b.StartTimer()

			onWire()
			r := runFirstSync(b, bundle, fmt.Sprintf("serve-%d", i), n, meter)

			b.StopTimer()
			if statements > 0 {
				logStatements(b, bundle.pool, statements)
			}
			b.Logf("run %d%s%s: %s%s", i+1, map[bool]string{true: " (provider hanging)", false: ""}[mode == "compare" && profiled],
				map[bool]string{true: "", false: " (compression off)"}[compress], r, onWire())
			bundle.requireStored(b, "bench", "INBOX", user, c)
			if !compress {
				plain.add(r)
				continue
			}
			if profiled {
				withProfile.add(r)
			} else {
				withoutProfile.add(r)
			}
			total.add(r)
		}
	}
	b.StopTimer()

	mbsyncRate := 0.0
	if path := mbsyncPath(b); path != "" {
		for _, compress := range []bool{true, false} {
			onWire()
			r := runMbsync(b, path, bundle, user, "INBOX", n, imapPort, compress)
			name := map[bool]string{true: "mbsync", false: "mbsync_nocompress"}[compress]
			b.Logf("%s: %s, %.0f msgs/s%s", name, r, float64(n)/r.elapsed.Seconds(), onWire())
			b.ReportMetric(float64(n)/r.elapsed.Seconds(), name+"_msgs/s")
			if compress {
				mbsyncRate = float64(n) / r.elapsed.Seconds()
			}
		}
	}
	if compare {
		k := float64(b.N)
		secs := plain.elapsed.Seconds() / k
		b.ReportMetric(float64(n)/secs, "nocompress_msgs/s")
		b.ReportMetric(plain.cpu.serve.Seconds()/k, "nocompress_serve_cpu_s")
		b.ReportMetric(plain.cpu.postgres.Seconds()/k, "nocompress_postgres_cpu_s")
		b.ReportMetric(plain.cpu.dovecot.Seconds()/k, "nocompress_dovecot_cpu_s")
	}
	if slow && mbsyncRate > 0 {
		rate := float64(n) / (total.elapsed.Seconds() / float64(b.N))
		b.Logf("slow link: MailFathom %.0f msgs/s with compression, mbsync with its defaults %.0f msgs/s; target at least as fast: %s",
			rate, mbsyncRate, verdict(rate >= mbsyncRate))
	}

	if mode == "compare" && b.N >= 2 {
		on, off := float64((b.N+1)/2), float64(b.N/2)
		mean := func(d time.Duration, k float64) float64 { return d.Seconds() / k }
		cost := mean(withProfile.elapsed, on)/mean(withoutProfile.elapsed, off) - 1
		b.ReportMetric(cost*100, "offer_cost_%")
		b.Logf("provider hanging: %.2f s, CPU serve %.2f s, PostgreSQL %.2f s a run (%v runs); no profile: %.2f s, CPU serve %.2f s, PostgreSQL %.2f s a run (%v runs); the offer costs %+.1f %% (goal: at most 10 %%)",
			mean(withProfile.elapsed, on), mean(withProfile.cpu.serve, on), mean(withProfile.cpu.postgres, on), on,
			mean(withoutProfile.elapsed, off), mean(withoutProfile.cpu.serve, off), mean(withoutProfile.cpu.postgres, off), off, cost*100)
	}
	iterations := float64(b.N)
	secs := total.elapsed.Seconds() / iterations
	b.ReportMetric(float64(n)/secs, "msgs/s")
	b.ReportMetric(float64(c.bytes)/1e6/secs, "MB/s")
	b.ReportMetric(float64(total.peakRSS)/(1<<20), "peak_rss_MiB")
	b.ReportMetric(total.cpu.serve.Seconds()/iterations, "serve_cpu_s")
	b.ReportMetric(total.cpu.postgres.Seconds()/iterations, "postgres_cpu_s")
	b.ReportMetric(total.cpu.dovecot.Seconds()/iterations, "dovecot_cpu_s")
	perMessage := func(d time.Duration) time.Duration { return d / time.Duration(float64(n)*iterations) }
	busy := (total.cpu.serve + total.cpu.postgres + total.cpu.dovecot).Seconds() / iterations / secs / 2
	b.ReportMetric(busy*100, "cores_busy_%")
	b.Logf("database: %s; targets: at least %d msgs/s (%s), peak RSS below %d MiB (%s), PostgreSQL at most %v per message (%v: %s), serve at most %v (%v: %s), both cores at least %.0f %% busy (%.0f %%: %s)",
		map[bool]string{true: "durable cluster on disk", false: "pgtest (fsync off, tmpfs)"}[durable],
		targetMessagesPerSecond, verdict(float64(n)/secs >= targetMessagesPerSecond),
		rssBudget>>20, verdict(total.peakRSS < rssBudget),
		targetPostgresCPU, perMessage(total.cpu.postgres), verdict(perMessage(total.cpu.postgres) <= targetPostgresCPU),
		targetServeCPU, perMessage(total.cpu.serve), verdict(perMessage(total.cpu.serve) <= targetServeCPU),
		targetCoresBusy*100, busy*100, verdict(busy >= targetCoresBusy))
}

// portOf returns the port of a host:port address.
func portOf(t testing.TB, addr string) int {
	t.Helper()
	_, port, err := net.SplitHostPort(addr)
	require.NoError(t, err)
	n, err := strconv.Atoi(port)
	require.NoError(t, err)
	return n
}

func verdict(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

// benchRun is what one first sync measured.
type benchRun struct {
	elapsed  time.Duration // start of the process to the last message stored
	serving  time.Duration // start of the process to "serving"
	first    time.Duration // start of the process to the first pass's start
	inPasses time.Duration // sum of the passes' own durations
	passes   int
	peakRSS  int64
	cpu      cpuUse
}

func (r *benchRun) add(o benchRun) {
	r.elapsed += o.elapsed
	r.serving += o.serving
	r.first += o.first
	r.inPasses += o.inPasses
	r.passes += o.passes
	r.peakRSS = max(r.peakRSS, o.peakRSS)
	r.cpu.serve += o.cpu.serve
	r.cpu.postgres += o.cpu.postgres
	r.cpu.dovecot += o.cpu.dovecot
	r.cpu.machine += o.cpu.machine
}

func (r benchRun) String() string {
	gaps := r.elapsed - r.first - r.inPasses
	return fmt.Sprintf("%.2f s: serving after %.2f s, first pass started after %.2f s, %d passes took %.2f s together, %.2f s between them; peak RSS %.1f MiB; CPU: %s",
		r.elapsed.Seconds(), r.serving.Seconds(), r.first.Seconds(), r.passes, r.inPasses.Seconds(), gaps.Seconds(),
		float64(r.peakRSS)/(1<<20), r.cpu)
}

// runFirstSync starts serve, waits until n messages are stored, and
// measures.
func runFirstSync(b *testing.B, bundle *testBundle, name string, n int, meter *cpuMeter) benchRun {
	var r benchRun
	start := time.Now()
	p := startServe(b, name, bundle.dir, bundle.env)
	// The log is read only on failure: the run is measured.
	poll.Every(b, 20*time.Millisecond, 15*time.Minute, "the sync finished", func() bool {
		if bundle.storedCount(b) >= n {
			return true
		}
		require.True(b, p.running(), "serve exited during the sync:\n%s", tailLines(p.rawLog(), 40))
		return false
	}, func() string { return "\n" + tailLines(p.rawLog(), 40) })
	r.elapsed = time.Since(start)

	var err error
	r.peakRSS, err = p.peakRSS()
	require.NoError(b, err)
	r.cpu, err = meter.read(p.pid())
	require.NoError(b, err)
	p.stop(b)
	if d := os.Getenv("MAILFATHOM_BENCH_KEEPLOG"); d != "" {
		_ = os.WriteFile(filepath.Join(d, name+fmt.Sprint(time.Now().UnixNano())+".log"), []byte(p.rawLog()), 0o644)
	}

	for _, l := range p.logLines() {
		at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"]))
		switch l.msg() {
		case "serving":
			r.serving = at.Sub(start)
		case "folder pass finished":
			d, _ := l.duration("duration")
			if r.passes == 0 {
				r.first = at.Add(-time.Duration(d)).Sub(start)
			}
			r.passes++
			r.inPasses += time.Duration(d)
		}
	}
	return r
}

// benchDatabases returns a function that creates a fresh, empty database
// and returns its URL: in a durable private cluster on disk (what the
// embedded default iterations), or in pgtest's cluster.
func benchDatabases(b *testing.B, durable, statements bool) func() string {
	if !durable {
		return func() string { return pgtest.Database(b) }
	}
	ctx := context.Background()
	// Not b.TempDir(): as root the server iterations as "postgres", which must be
	// able to enter the directory.
	dir, err := os.MkdirTemp("", "mailfathom-bench-")
	require.NoError(b, err)
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(b, os.Chmod(dir, 0o755))
	var settings map[string]string
	if statements {
		settings = map[string]string{"shared_preload_libraries": "pg_stat_statements", "pg_stat_statements.track": "all"}
	}
	cluster, err := pgcluster.Start(ctx, pgcluster.Options{
		DataDir:  filepath.Join(dir, "postgres"),
		Durable:  true,
		Logf:     b.Logf,
		Settings: settings,
	})
	require.NoError(b, err)
	b.Cleanup(func() { require.NoError(b, cluster.Stop(context.Background())) })
	count := 0
	return func() string {
		count++
		name := fmt.Sprintf("bench_%d", count)
		pool, err := newPool(cluster.ConnString("postgres"))
		require.NoError(b, err)
		defer pool.Close()
		dbassert.CreateDatabase(b, pool, name)
		return cluster.ConnString(name)
	}
}

// logStatements prints the n statements that took the most execution time
// since the last reset, with their calls and rows: where PostgreSQL's share
// of a run went. Statement texts are the service's own SQL, normalized
// (constants replaced by $n), so no mail appears.
func logStatements(b *testing.B, pool *pgxpool.Pool, n int) {
	var all float64
	var lines []string
	for _, s := range dbassert.SlowestStatements(b, pool, n) {
		exec, plan := s.Milliseconds-s.PlanMilliseconds, s.PlanMilliseconds
		query := []rune(s.Query)
		all += s.Milliseconds
		lines = append(lines, fmt.Sprintf("%9.1f ms exec %8.1f ms plan %7d calls %8d rows %7.1f MB WAL  %s",
			exec, plan, s.Calls, s.Rows, s.WALBytes/1e6, string(query[:min(len(query), 160)])))
	}
	// Printed, not logged: a benchmark's log is cut after a few lines.
	fmt.Printf("top %d statements (%.0f ms together):\n%s\n", len(lines), all, strings.Join(lines, "\n"))
}
