package forwardpass

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/heapgoal"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/mimex"
	"github.com/mailfathom/mailfathom/schema"
)

// BenchmarkIngest runs the forward pass over a generated corpus served by an
// in-memory session (no IMAP, no TLS, no Dovecot) into a durable PostgreSQL
// cluster on disk, and reports the CPU PostgreSQL spent on it: the part of
// the first sync's cost the database carries, without the e2e benchmark's
// other processes. It runs on demand only:
//
//	go test -run '^$' -bench Ingest -benchtime 1x ./internal/forwardpass
//
// MAILFATHOM_INGEST_MESSAGES sets the corpus size (default 5000: the e2e
// benchmark's corpus, same generator, seed and size mix).
// MAILFATHOM_INGEST_CORPUS picks it: realistic (the default,
// mailgen.Realistic) or prose (mailgen.Message's worst case for indexing).
// MAILFATHOM_INGEST_SQL is SQL run after the migrations, to measure a
// variant of the schema (e.g. "ALTER TABLE email_search_documents DROP
// COLUMN search_vector"). MAILFATHOM_INGEST_SETTINGS is a comma-separated
// list of name=value server settings. MAILFATHOM_INGEST_STATEMENTS=true
// loads pg_stat_statements and logs the statements' times (wall time in the
// backend, so they include waiting for a CPU). MAILFATHOM_INGEST_URL
// names a running server's "postgres" database to use instead of a fresh
// cluster (its data directory's postmaster.pid must be readable), which
// keeps the ingested database for inspection.
//
// The corpus is generated once into files under the temporary directory
// (mailfathom-ingest-corpus-*) and read from there, so the writer's CPU is
// not mixed with the generator's; the process keeps serve's heap goal
// (live heap plus 48 MiB). writer_cpu_s is this process's CPU during the
// pass, reading the files included (a cached read, far cheaper than a TLS
// IMAP read). wal_KB/msg is the WAL PostgreSQL wrote per message.
// MAILFATHOM_INGEST_CPUPROFILE names a file for a CPU profile of the pass
// alone (go test's -cpuprofile also covers the cluster's setup).
func BenchmarkIngest(b *testing.B) {
	n := 5000
	if v := os.Getenv("MAILFATHOM_INGEST_MESSAGES"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatal(err)
		}
	}
	statements := os.Getenv("MAILFATHOM_INGEST_STATEMENTS") == "true"
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "mailfathom-ingest-")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	settings := map[string]string{}
	if statements {
		settings["shared_preload_libraries"] = "pg_stat_statements"
		settings["pg_stat_statements.track"] = "all"
		settings["track_functions"] = "all"
	}
	if v := os.Getenv("MAILFATHOM_INGEST_SETTINGS"); v != "" {
		for _, kv := range strings.Split(v, ",") {
			k, val, _ := strings.Cut(kv, "=")
			settings[k] = val
		}
	}
	// MAILFATHOM_INGEST_URL names a running server's maintenance database
	// to use instead (its postmaster.pid must be readable).
	connString := func(db string) string {
		return strings.Replace(os.Getenv("MAILFATHOM_INGEST_URL"), "/postgres?", "/"+db+"?", 1)
	}
	var dataDir string
	if os.Getenv("MAILFATHOM_INGEST_URL") == "" {
		cluster, err := pgcluster.Start(ctx, pgcluster.Options{
			DataDir: filepath.Join(dir, "postgres"), Durable: true, Settings: settings, Logf: b.Logf,
		})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = cluster.Stop(context.Background()) })
		connString, dataDir = cluster.ConnString, cluster.DataDir()
	} else {
		pool, err := pgxpool.New(ctx, connString("postgres"))
		if err != nil {
			b.Fatal(err)
		}
		dataDir = dbassert.Setting(b, pool, "data_directory")
		pool.Close()
	}
	pid, err := postmasterPID(dataDir)
	if err != nil {
		b.Fatal(err)
	}

	corpus := newIngestCorpus(b, n, os.Getenv("MAILFATHOM_INGEST_CORPUS"))
	defer heapgoal.Keep(48 << 20).Stop()
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for i := range b.N {
		b.StopTimer()
		pool, err := pgxpool.New(ctx, connString("postgres"))
		if err != nil {
			b.Fatal(err)
		}
		name := fmt.Sprintf("ingest_%d_%d", time.Now().Unix(), i)
		dbassert.CreateDatabase(b, pool, name)
		pool.Close()
		pool, err = pgxpool.New(ctx, connString(name))
		if err != nil {
			b.Fatal(err)
		}
		if _, err := schema.Migrate(ctx, pool, logger); err != nil {
			b.Fatal(err)
		}
		if statements {
			dbassert.ResetStatementStatistics(b, pool)
		}
		if v := os.Getenv("MAILFATHOM_INGEST_SQL"); v != "" {
			if _, err := pool.Exec(ctx, v); err != nil {
				b.Fatal(err)
			}
		}
		accountID, err := mailstore.EnsureAccount(ctx, pool, "bench")
		if err != nil {
			b.Fatal(err)
		}
		tx, err := pool.Begin(ctx)
		if err != nil {
			b.Fatal(err)
		}
		binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		if err != nil {
			b.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			b.Fatal(err)
		}
		conn, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}
		second, err := pool.Acquire(ctx)
		if err != nil {
			b.Fatal(err)
		}

		pgBefore, err := treeCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		dbassert.ResetWriteStatistics(b, pool)
		walBefore := dbassert.WALPosition(b, pool)
		if path := os.Getenv("MAILFATHOM_INGEST_CPUPROFILE"); path != "" && i == 0 {
			f, err := os.Create(path)
			if err != nil {
				b.Fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				b.Fatal(err)
			}
			defer f.Close()
		}
		selfBefore := selfCPU()
		start := time.Now()
		b.StartTimer()
		sess := &ingestSession{c: corpus}
		for {
			rep, err := Run(ctx, conn, sess, binding, Options{
				SecondWriter: second, BatchSize: 100, BatchesPerRun: 10, MaxRawMimeBytes: 25 << 20,
				Extraction: mimex.Limits{MaxPartCount: 1000, MaxNestingDepth: 30, MaxExtractedTextCharacters: 100000},
			}, logger)
			if err != nil {
				b.Fatal(err)
			}
			if !rep.More {
				break
			}
		}
		b.StopTimer()
		elapsed := time.Since(start)
		self := selfCPU() - selfBefore
		if os.Getenv("MAILFATHOM_INGEST_CPUPROFILE") != "" && i == 0 {
			pprof.StopCPUProfile()
		}
		pgAfter, err := treeCPU(pid)
		if err != nil {
			b.Fatal(err)
		}
		wal := dbassert.WALBytesSince(b, pool, walBefore)
		pg := pgAfter - pgBefore
		load, _ := os.ReadFile("/proc/loadavg")
		b.Logf("run %d: %d messages in %.2f s (%.0f msgs/s); PostgreSQL %.2f s CPU (%.3f ms/msg), writer %.2f s CPU (%.3f ms/msg); WAL %.1f MB (%.1f KB/msg); loadavg %s",
			i+1, n, elapsed.Seconds(), float64(n)/elapsed.Seconds(), pg.Seconds(), pg.Seconds()*1000/float64(n),
			self.Seconds(), self.Seconds()*1000/float64(n), float64(wal)/1e6, float64(wal)/1e3/float64(n), strings.TrimSpace(string(load)))
		b.ReportMetric(pg.Seconds(), "postgres_cpu_s")
		b.ReportMetric(self.Seconds(), "writer_cpu_s")
		b.ReportMetric(float64(wal)/1e3/float64(n), "wal_KB/msg")
		b.ReportMetric(float64(n)/elapsed.Seconds(), "msgs/s")
		b.Logf("%s", dbassert.WriteStatistics(b, pool))
		if statements {
			logStatements(b, pool)
		}
		b.Logf("sizes: %s", dbassert.TableSizes(b, pool, "stored_emails", "email_message_contents", "email_search_documents",
			"email_participants", "email_attachments", "email_passages"))
		b.Logf("autovacuum during the run: %s", dbassert.Autovacuums(b, pool))
		conn.Release()
		second.Release()
		pool.Close()
	}
}

func logStatements(b *testing.B, pool *pgxpool.Pool) {
	for _, s := range dbassert.SlowestStatements(b, pool, 25) {
		query := []rune(s.Query)
		b.Logf("%8d calls %9.0f ms (exec+plan)  plan %.0f ms: %s", s.Calls, s.Milliseconds, s.PlanMilliseconds, string(query[:min(len(query), 160)]))
	}
	for _, f := range dbassert.SlowestFunctions(b, pool, 10) {
		b.Logf("function %s: %d calls %.0f ms (self %.0f ms)", f.Name, f.Calls, f.Milliseconds, f.SelfMilliseconds)
	}
}

// ingestCorpus is the e2e benchmark's corpus, generated once into files
// that the session reads as a server's literal would arrive: one buffer per
// message.
type ingestCorpus struct {
	dir   string
	sizes []int
}

func newIngestCorpus(b *testing.B, n int, kind string) *ingestCorpus {
	var generate func(i int) []byte
	switch kind {
	case "", "realistic":
		kind = "realistic"
		generate = func(i int) []byte { return mailgen.Realistic(42, i) }
	case "prose":
		rng := rand.New(rand.NewPCG(42, 7))
		sizes := make([]int, n)
		for i := range sizes {
			sizes[i] = mailgen.ReferenceSize(rng)
		}
		generate = func(i int) []byte { return mailgen.Message(42, i, max(1, sizes[i])) }
	default:
		b.Fatalf("MAILFATHOM_INGEST_CORPUS=%q: want realistic or prose", kind)
	}
	c := &ingestCorpus{dir: filepath.Join(os.TempDir(), fmt.Sprintf("mailfathom-ingest-corpus-%d-%s-%d", os.Getuid(), kind, n))}
	complete := filepath.Join(c.dir, "complete")
	if _, err := os.Stat(complete); err != nil {
		if err := os.MkdirAll(c.dir, 0o700); err != nil {
			b.Fatal(err)
		}
		for i := range n {
			if err := os.WriteFile(c.path(i), generate(i), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		if err := os.WriteFile(complete, nil, 0o600); err != nil {
			b.Fatal(err)
		}
	}
	for i := range n {
		st, err := os.Stat(c.path(i))
		if err != nil {
			b.Fatal(err)
		}
		c.sizes = append(c.sizes, int(st.Size()))
	}
	return c
}

func (c *ingestCorpus) path(i int) string { return filepath.Join(c.dir, strconv.Itoa(i)+".eml") }

func (c *ingestCorpus) message(i int) ([]byte, error) { return os.ReadFile(c.path(i)) }

// ingestSession serves the corpus as UIDs 1..n.
type ingestSession struct{ c *ingestCorpus }

func (s *ingestSession) Examine(context.Context, string) (imapx.FolderState, error) {
	n := uint32(len(s.c.sizes))
	return imapx.FolderState{Path: "INBOX", UIDValidity: 1, UIDNext: n + 1, Exists: n}, nil
}

func (s *ingestSession) SearchUIDs(_ context.Context, after uint32, _ time.Time) ([]uint32, error) {
	var out []uint32
	for u := after + 1; u <= uint32(len(s.c.sizes)); u++ {
		out = append(out, u)
	}
	return out, nil
}

func (s *ingestSession) FetchMetadata(_ context.Context, uids []uint32) ([]imapx.MessageMetadata, error) {
	out := make([]imapx.MessageMetadata, len(uids))
	for i, u := range uids {
		out[i] = imapx.MessageMetadata{UID: u, Size: int64(s.c.sizes[u-1]), InternalDate: time.Unix(1.7e9+int64(u)*60, 0).UTC(),
			Subject: fmt.Sprintf("Synthetic message %d", u-1), MessageID: fmt.Sprintf("msg-42-%d@example.test", u-1)}
	}
	return out, nil
}

func (s *ingestSession) FetchBodies(_ context.Context, uids []uint32, _ int64, fn func(imapx.Body) error) error {
	for _, u := range uids {
		raw, err := s.c.message(int(u - 1))
		if err != nil {
			return err
		}
		if err := fn(imapx.Body{UID: u, Raw: raw}); err != nil {
			return err
		}
	}
	return nil
}

func (s *ingestSession) ExistingUIDs(_ context.Context, uids []uint32) ([]uint32, error) {
	return uids, nil
}

// ReconcileMode reports a server without modification sequences.
func (s *ingestSession) ReconcileMode() imapx.ReconcileMode { return imapx.Plain }

// IdentityScheme reports a server that does not name its messages.
func (s *ingestSession) IdentityScheme() imapx.IdentityScheme { return imapx.NoIdentity }

func (s *ingestSession) FetchIdentities(context.Context, []uint32) (map[uint32]imapx.MessageIdentity, error) {
	return nil, nil
}

func (s *ingestSession) Recover(ctx context.Context) (imapx.FolderState, error) {
	return s.Examine(ctx, "")
}

func postmasterPID(dataDir string) (int, error) {
	data, err := os.ReadFile(filepath.Join(dataDir, "postmaster.pid"))
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(strings.SplitN(string(data), "\n", 2)[0]))
}

func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// treeCPU is the CPU time of root and its descendants, exited ones included.
func treeCPU(root int) (time.Duration, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	type st struct {
		ppid       int
		own, reapd int64
	}
	stats := map[int]st{}
	children := map[int][]int{}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := strings.LastIndexByte(string(data), ')')
		f := strings.Fields(string(data[i+1:]))
		num := func(k int) int64 { n, _ := strconv.ParseInt(f[k-3], 10, 64); return n }
		stats[pid] = st{int(num(4)), num(14) + num(15), num(16) + num(17)}
		children[int(num(4))] = append(children[int(num(4))], pid)
	}
	var total int64
	queue := []int{root}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		total += stats[p].own + stats[p].reapd
		queue = append(queue, children[p]...)
	}
	return time.Duration(total) * time.Second / 100, nil
}
