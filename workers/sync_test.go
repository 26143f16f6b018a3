package workers_test

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/embedding"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/outbound"
	"github.com/mailfathom/mailfathom/internal/resilience"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/workers"
)

// testParallel is how many of the package's tests run at once unless
// -test.parallel says otherwise (or the machine has more CPUs). Go's
// default, GOMAXPROCS, is two in CI, yet these tests spend most of their
// time waiting rather than computing: for Dovecot, for River's polls and
// snoozes, for push renewals and degradation periods. Measured on two
// shared cores, the test binary and its Dovecot servers used 90 s of CPU
// in 180 s of wall time at four (the package took 172 s instead of 248 s
// at two); at eight each test took twice as long and the package gained
// little.
const testParallel = 4

func TestMain(m *testing.M) {
	flag.Parse()
	given := false
	flag.Visit(func(f *flag.Flag) { given = given || f.Name == "test.parallel" })
	if !given {
		if err := flag.Set("test.parallel", strconv.Itoa(max(testParallel, runtime.GOMAXPROCS(0)))); err != nil {
			fmt.Fprintf(os.Stderr, "workers tests: set -test.parallel: %v\n", err)
			os.Exit(2)
		}
	}
	pgtest.Main(m)
}

type syncBundle struct {
	server *dovecot.Server
	user   *dovecot.User
	pool   *pgxpool.Pool
	env    map[string]string
	logs   *capture.Buffer
	client *river.Client[pgx.Tx]
	stop   func()
	// metrics holds the resilience metrics of the latest start.
	metrics *prometheus.Registry
	// workerDeps are the workers' dependencies of the latest start.
	workerDeps workers.Dependencies
	// openRead, when set, opens the read sessions.
	openRead func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error)
	// openWrite, when set, opens the write connections.
	openWrite func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error)
	// noMutationWorkers leaves the mutations queue unworked, so mutations
	// advance only in account runs.
	noMutationWorkers bool
	// editConfig, when set, edits the loaded configuration before the
	// workers are built from it, for what the environment cannot say yet.
	editConfig func(*config.Config)
	// editDeps, when set, edits the workers' dependencies.
	editDeps func(*workers.Dependencies)

	// embedding, when its ProviderURL is set, is the embedding profile the
	// next start configures, and embedWorkers the embeddings queue's
	// workers (none: offers are made and nothing drains them).
	embedding    config.Embedding
	embedWorkers int
	// embeddingsUnwaited makes waitIdle leave the embeddings queue's jobs
	// out even when workers drain it, for a test that waits for them in
	// its own terms rather than through River's retry backoff.
	embeddingsUnwaited bool
}

// setupSync starts Dovecot, a migrated database, and a configuration for
// one account on that Dovecot (implicit TLS, the harness CA as the trusted
// authority). Options edit the environment before anything starts.
func setupSync(t *testing.T, opts ...dovecot.Option) *syncBundle {
	t.Helper()
	return setupSyncOn(t, dovecot.Start(t, opts...))
}

// setupSyncOn is setupSync on the Dovecot s.
func setupSyncOn(t *testing.T, s *dovecot.Server) *syncBundle {
	t.Helper()
	u := s.NewUser()
	files, err := s.CA().WriteFiles(t.TempDir())
	require.NoError(t, err)
	b := &syncBundle{
		server: s,
		user:   u,
		pool:   dbtest.Pool(t),
		logs:   &capture.Buffer{},
		env:    accountEnv(t, s.Host(), s.TLSPort(), u.Name(), u.Password()),
	}
	b.env["MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST"] = "AdditionalTrustedAuthority"
	b.env["MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY"] = "file:" + files.CACert
	t.Cleanup(func() {
		if b.stop != nil {
			b.stop()
		}
	})
	return b
}

// accountEnv is the environment of one account, "primary", that logs in
// to host:port as username with password (kept in a file of t's) and
// synchronizes hourly.
func accountEnv(t *testing.T, host string, port int, username, password string) map[string]string {
	t.Helper()
	pw := filepath.Join(t.TempDir(), "imap-password")
	require.NoError(t, os.WriteFile(pw, []byte(password+"\n"), 0o600))
	return map[string]string{
		"MAILFATHOM_SYNC_ENABLED":             "true",
		"MAILFATHOM_SYNC_INTERVAL":            "1h",
		"MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF": "1h",
		"MAILFATHOM_ACCOUNTS_0_ID":            "primary",
		"MAILFATHOM_ACCOUNTS_0_HOST":          host,
		"MAILFATHOM_ACCOUNTS_0_PORT":          strconv.Itoa(port),
		"MAILFATHOM_ACCOUNTS_0_USERNAME":      username,
		"MAILFATHOM_ACCOUNTS_0_PASSWORD":      "file:" + pw,
	}
}

// start (re)starts the River client with the bundle's current environment.
func (b *syncBundle) start(t *testing.T) {
	t.Helper()
	if b.stop != nil {
		b.stop()
	}
	var environ []string
	for k, v := range b.env {
		environ = append(environ, k+"="+v)
	}
	cfg, err := config.Load(environ)
	require.NoError(t, err)
	if b.editConfig != nil {
		b.editConfig(cfg)
	}
	logger := slog.New(slog.NewJSONHandler(b.logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ws := river.NewWorkers()
	b.metrics = prometheus.NewRegistry()
	if b.embedding.Configured() {
		// Provider failures are spent in milliseconds and never open the
		// circuit, so a test sees a recovered provider at once.
		ai := cfg.Resilience[resilience.AiProviderInvocation]
		ai.BaseDelay, ai.MaxDelay, ai.CircuitBreakerMinimumThroughput = 5*time.Millisecond, 20*time.Millisecond, 10_000
		cfg.Resilience[resilience.AiProviderInvocation] = ai
	}
	pipelines, err := outbound.NewRegistry(cfg.Resilience, logger, b.metrics)
	require.NoError(t, err)
	stopping := make(chan struct{})
	deps := workers.Dependencies{Pool: b.pool, Config: cfg, Logger: logger, Resilience: pipelines, OpenWriteConnection: b.openWrite, OpenSession: b.openRead, Stopping: stopping}
	// A unit that meets a concurrency bound (one folder of the account at
	// a time, by default) snoozes for seconds in production; here it comes
	// back within half a second, still through River's snooze.
	workers.WithDeferral(&deps, testDeferral)
	if b.editDeps != nil {
		b.editDeps(&deps)
	}
	queues := map[string]int{jobs.QueueAccounts: 2, jobs.QueueFolders: 2, jobs.QueueBackfill: 1, jobs.QueueWatches: 2}
	if b.embedding.Configured() {
		cfg.Embedding = b.embedding
		deps.EmbeddingMetrics, err = embedding.NewMetrics(b.metrics)
		require.NoError(t, err)
		deps.Embedder, err = embedding.NewClient(embedding.Options{URL: cfg.Embedding.ProviderURL,
			Profile:  embedding.Profile{Model: cfg.Embedding.Model, Dimensions: cfg.Embedding.Dimensions},
			APIKey:   cfg.Embedding.APIKey,
			Registry: pipelines, Metrics: deps.EmbeddingMetrics})
		require.NoError(t, err)
		if b.embedWorkers > 0 {
			queues[jobs.QueueEmbeddings] = b.embedWorkers
		}
	}
	deps, err = workers.NewDependencies(deps)
	require.NoError(t, err)
	b.workerDeps = deps
	failures, err := workers.Register(ws, deps)
	require.NoError(t, err)
	queues[jobs.QueueMutations] = 1
	if b.noMutationWorkers {
		queues[jobs.QueueMutations] = 0
	}
	client, err := jobqueue.NewClient(jobqueue.Config{
		Pool:         b.pool,
		Workers:      ws,
		Middleware:   []rivertype.WorkerMiddleware{failures},
		QueueWorkers: queues,
		Logger:       logger,
	})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	require.NoError(t, client.Start(ctx))
	b.client = client
	b.stop = func() {
		close(stopping)
		require.NoError(t, jobqueue.Drain(context.Background(), client, 5*time.Second))
		cancel()
		b.stop = nil
	}
	_, err = workers.ScheduleConfiguredAccounts(context.Background(), deps, client)
	require.NoError(t, err)
	_, err = workers.ScheduleExtractionBackfill(context.Background(), deps, client)
	require.NoError(t, err)
	_, err = workers.ScheduleEmbeddingBackfill(context.Background(), deps, client)
	require.NoError(t, err)
}

// testDeferral is the snooze of a test's units that meet a concurrency
// bound: short, and jittered as in production so units contending for one
// slot do not return in step.
func testDeferral() time.Duration {
	return 100*time.Millisecond + rand.N(400*time.Millisecond)
}

// deps returns the workers' dependencies of the running client.
func (b *syncBundle) deps(t *testing.T) workers.Dependencies {
	t.Helper()
	require.NotNil(t, b.workerDeps.Pool, "start the bundle first")
	return b.workerDeps
}

// runAgain makes the account's scheduled next run due now and waits for
// the work it causes.
func (b *syncBundle) runAgain(t *testing.T) {
	t.Helper()
	dbassert.MakeJobsDue(t, b.pool, "account_run", rivertype.JobStateScheduled)
	b.waitIdle(t)
}

// waitIdle waits until no job is due or running: every folder pass has
// finished and the account's next run lies in the future. Without
// embedding workers the embeddings queue's jobs wait for none, and are
// not waited for; nor are they with embeddingsUnwaited.
func (b *syncBundle) waitIdle(t *testing.T) {
	t.Helper()
	// Settled is three looks in a row, 50ms apart, that find nothing due.
	quiet := 0
	embeddingsWaited := b.embedWorkers > 0 && !b.embeddingsUnwaited
	poll.Every(t, 50*time.Millisecond, 2*time.Minute, "jobs settled", func() bool {
		busy := 0
		for _, j := range dbassert.JobsDueWithin(t, b.pool, 20*time.Second) {
			if j.Kind != "watch" && !(j.Kind == "mutation_stage" && b.noMutationWorkers) &&
				(j.Queue != jobs.QueueEmbeddings || embeddingsWaited) {
				busy++
			}
		}
		if busy == 0 {
			quiet++
		} else {
			quiet = 0
		}
		return quiet >= 3
	}, func() string { return "logs:\n" + b.logs.String() })
}

type storedRow struct {
	uidValidity  int64
	uid          int64
	availability string
	sha          []byte
	length       *int64
}

// stored returns what is stored of alias, in generation, UIDVALIDITY and
// UID order.
func (b *syncBundle) stored(t *testing.T, alias string) []storedRow {
	t.Helper()
	var out []storedRow
	for _, o := range dbassert.Occurrences(t, b.pool, alias) {
		out = append(out, storedRow{uidValidity: int64(o.UIDValidity), uid: int64(o.UID), availability: o.Availability,
			sha: o.ContentSHA256, length: o.ContentLength})
	}
	return out
}

// servedValidities returns the UIDVALIDITY of every served email, each
// once, in order.
func (b *syncBundle) servedValidities(t *testing.T) []int64 {
	t.Helper()
	var out []int64
	for _, o := range dbassert.Occurrences(t, b.pool, "") {
		if o.Served && !slices.Contains(out, int64(o.UIDValidity)) {
			out = append(out, int64(o.UIDValidity))
		}
	}
	slices.Sort(out)
	return out
}

// lastPassOutput returns the output of the newest finished folder pass of
// alias.
func (b *syncBundle) lastPassOutput(t *testing.T, alias string) map[string]any {
	t.Helper()
	passes := dbassert.Jobs(t, b.pool, "folder_pass")
	for i := len(passes) - 1; i >= 0; i-- {
		if j := passes[i]; j.State == rivertype.JobStateCompleted && j.Arg("alias") == alias {
			var metadata struct {
				Output map[string]any `json:"output"`
			}
			require.NoError(t, json.Unmarshal([]byte(j.Metadata), &metadata))
			if metadata.Output == nil {
				return map[string]any{}
			}
			return metadata.Output
		}
	}
	require.Failf(t, "no finished folder pass", "of alias %s; jobs:\n%s", alias, b.jobHistory(t))
	return nil
}

// jobHistory lists every job of the bundle's database with its state and
// last error, oldest first: what a failed expectation about the work
// done needs to be read.
func (b *syncBundle) jobHistory(t *testing.T) string {
	t.Helper()
	var out strings.Builder
	for _, j := range dbassert.Jobs(t, b.pool, "") {
		alias, _ := j.Arg("alias").(string)
		fmt.Fprintf(&out, "%d %s %s %s attempt %d due %v %s\n", j.ID, j.Kind, alias, j.State, j.Attempt,
			time.Until(j.ScheduledAt).Round(time.Second), j.LastError())
	}
	return out.String()
}

// completed counts the completed jobs of kind by the kind of the job that
// carried each; those that ran on their own count under "".
func (b *syncBundle) completed(t *testing.T, kind string) map[string]int {
	t.Helper()
	all := dbassert.Jobs(t, b.pool, "")
	kinds := map[int64]string{}
	for _, j := range all {
		kinds[j.ID] = j.Kind
	}
	out := map[string]int{}
	for _, j := range all {
		if j.Kind == kind && j.State == rivertype.JobStateCompleted {
			out[kinds[j.CarriedBy]]++
		}
	}
	return out
}

// carried is how many of the jobs byCarrier counts a job carried.
func carried(byCarrier map[string]int) int {
	n := 0
	for carrier, jobs := range byCarrier {
		if carrier != "" {
			n += jobs
		}
	}
	return n
}

func seed(t *testing.T, u *dovecot.User, folder string, n int, seedValue uint64) [][]byte {
	t.Helper()
	rng := rand.New(rand.NewPCG(seedValue, 1))
	msgs := make([]dovecot.SeedMessage, n)
	raws := make([][]byte, n)
	for i := range msgs {
		raws[i] = mailgen.Message(seedValue, i, mailgen.Size(rng)/4)
		msgs[i] = dovecot.SeedMessage{Raw: raws[i], InternalDate: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)}
	}
	u.SeedMaildir(folder, msgs)
	return raws
}

func assertUnseen(t *testing.T, u *dovecot.User, folder string) {
	t.Helper()
	for _, uid := range u.UIDs(folder) {
		require.NotContains(t, u.Flags(folder, uid), imap.FlagSeen, "uid %d was marked read", uid)
	}
}

func TestForwardSynchronization(t *testing.T) {
	t.Parallel()

	t.Run("StoresFolderCompletelyAndIncrementally", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "25"
		b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN"] = "2"
		raws := seed(t, b.user, "INBOX", 120, 1)
		b.start(t)
		b.waitIdle(t)

		rows := b.stored(t, "INBOX")
		require.Len(t, rows, len(raws))
		for i, r := range rows {
			require.Equal(t, int64(i+1), r.uid)
			require.Equal(t, "Available", r.availability)
			sum := sha256.Sum256(raws[i])
			require.Equal(t, sum[:], r.sha, "uid %d", r.uid)
			require.Equal(t, int64(len(raws[i])), *r.length)
		}
		assertUnseen(t, b.user, "INBOX")

		// A second run fetches no body.
		b.runAgain(t)
		require.EqualValues(t, 0, b.lastPassOutput(t, "INBOX")["stored"])
		require.Len(t, b.stored(t, "INBOX"), len(raws))

		// Mail appended later arrives on the next run.
		later := mailgen.Message(99, 1, 3000)
		b.user.Append("INBOX", later, time.Now())
		b.runAgain(t)
		rows = b.stored(t, "INBOX")
		require.Len(t, rows, len(raws)+1)
		sum := sha256.Sum256(later)
		require.Equal(t, sum[:], rows[len(rows)-1].sha)
		assertUnseen(t, b.user, "INBOX")

		require.EqualValues(t, len(raws)+1, dbassert.Checkpoint(t, b.pool, "INBOX").LastSeenUID)
	})

	t.Run("OversizedMessageIsStoredAsMetadata", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.env["MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES"] = "4096"
		small := mailgen.Message(2, 1, 2000)
		big := mailgen.Message(2, 2, 20000)
		b.user.Append("INBOX", small, time.Now())
		b.user.Append("INBOX", big, time.Now())
		b.start(t)
		b.waitIdle(t)

		rows := b.stored(t, "INBOX")
		require.Len(t, rows, 2)
		require.Equal(t, "Available", rows[0].availability)
		require.Equal(t, "ExceededSizeLimit", rows[1].availability)
		require.Nil(t, rows[1].sha, "no content row for an oversized message")
		require.EqualValues(t, 1, b.lastPassOutput(t, "INBOX")["oversized"])
	})

	t.Run("EarliestDateExcludesWithoutFetching", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.env["MAILFATHOM_ACCOUNTS_0_EARLIEST_EMAIL_RECEIVED_DATE"] = "2025-06-01"
		var msgs []dovecot.SeedMessage
		for i := range 10 {
			day := time.Date(2025, 5, 27+i, 12, 0, 0, 0, time.UTC) // 5 before, 5 from June 1
			msgs = append(msgs, dovecot.SeedMessage{Raw: mailgen.Message(3, i, 1500), InternalDate: day})
		}
		// Old mail at the end too: the checkpoint must still reach the last UID.
		msgs = append(msgs, dovecot.SeedMessage{Raw: mailgen.Message(3, 99, 1500), InternalDate: time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)})
		b.user.SeedMaildir("INBOX", msgs)
		b.start(t)
		b.waitIdle(t)

		rows := b.stored(t, "INBOX")
		require.Len(t, rows, 5)
		for i, r := range rows {
			require.Equal(t, int64(6+i), r.uid)
		}
		out := b.lastPassOutput(t, "INBOX")
		require.EqualValues(t, 6, out["excluded_by_date"])
		require.EqualValues(t, 11, out["checkpoint_uid"])
	})

	t.Run("UIDValidityChangeStartsOver", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "archive"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Archive"
		seed(t, b.user, "Archive", 5, 4)
		b.start(t)
		b.waitIdle(t)
		first := b.stored(t, "ARCHIVE")
		require.Len(t, first, 5)
		search := func() []searchindex.Hit {
			hits, err := searchindex.Search(context.Background(), b.pool, searchindex.Query{
				Text: "synthetic", Accounts: []string{"primary"}, Configuration: "simple", Limit: 100})
			require.NoError(t, err)
			return hits
		}
		require.Len(t, search(), 5)

		// The folder is recreated with the same mail, as a server
		// migration does: each message is then served once, not twice.
		b.user.RecreateFolder("Archive")
		seed(t, b.user, "Archive", 5, 4)
		b.runAgain(t)

		rows := b.stored(t, "ARCHIVE")
		require.Len(t, rows, 10, "the old UID space is kept, the new one stored from UID 1")
		newValidity := int64(b.user.UIDValidity("Archive"))
		var n int
		for _, r := range rows {
			if r.uidValidity == newValidity {
				n++
			}
		}
		require.Equal(t, 5, n)
		require.EqualValues(t, newValidity, dbassert.Checkpoint(t, b.pool, "ARCHIVE").UIDValidity)

		// Only the new copy is served; the old one is kept.
		hits := search()
		require.Len(t, hits, 5, "each message once")
		require.Equal(t, []int64{newValidity}, b.servedValidities(t))
		out := b.lastPassOutput(t, "ARCHIVE")
		require.Equal(t, map[string]any{"replaced": true, "invalidated": float64(5)}, out["scope"])
		require.Equal(t, 1, strings.Count(b.logs.String(), "the folder was recreated on the server (its UIDVALIDITY changed)"), "logged once")
	})

	t.Run("RepointedAliasStartsANewGeneration", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "work"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Archive"
		seed(t, b.user, "Archive", 4, 6)
		seed(t, b.user, "Projects/2026", 2, 7)
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "WORK"), 4)

		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Projects/2026"
		b.start(t)
		b.runAgain(t)

		require.Equal(t, []int{1, 2}, dbassert.Generations(t, b.pool, "WORK"))
		stored := b.stored(t, "WORK")
		require.Len(t, stored, 6, "old rows are kept, the new folder is stored from UID 1")
		require.Equal(t, int64(1), stored[4].uid)

		require.Equal(t, 2, dbassert.MappingChanges(t, b.pool, "WORK"))
		require.Contains(t, b.logs.String(), "folder alias repointed")
	})

	t.Run("UnresolvedAndAmbiguousAliasesCostOnlyTheirFolder", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t, dovecot.WithExtraConfig(`namespace inbox {
  mailbox "Old Archive" {
    special_use = \Archive
    auto = create
  }
}`))
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE"] = "Inbox"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "flagged"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_SPECIAL_USE"] = "Flagged"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_2_ALIAS"] = "archive"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_2_SPECIAL_USE"] = "Archive"
		seed(t, b.user, "INBOX", 3, 8)
		b.start(t)
		b.waitIdle(t)

		require.Len(t, b.stored(t, "INBOX"), 3)
		logs := b.logs.String()
		require.Contains(t, logs, "FolderAliasUnresolved")
		require.Contains(t, logs, "FolderAliasAmbiguous")
		// The account was not backed off: its run completed and the next
		// one is scheduled an interval later.
		require.Equal(t, 1, dbassert.JobCount(t, b.pool, "account_run", rivertype.JobStateCompleted))
		require.Zero(t, dbassert.JobCount(t, b.pool, "account_run",
			rivertype.JobStateCancelled, rivertype.JobStateRetryable, rivertype.JobStateDiscarded))
	})

	t.Run("DroppedConnectionMidFetchLosesNothingAndMarksNothingRead", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		raws := seed(t, b.user, "INBOX", 60, 9)
		proxy := faultproxy.Start(t, b.server.TLSAddr())
		host, port := splitHostPort(t, proxy.Addr())
		b.env["MAILFATHOM_ACCOUNTS_0_HOST"] = host
		b.env["MAILFATHOM_ACCOUNTS_0_PORT"] = port
		// Cut the first few connections part-way through the body stream.
		proxy.CutAfter(faultproxy.Future, faultproxy.ServerToClient, 150_000)
		b.start(t)
		// Heal once a connection was cut, so the retry gets through.
		poll.Every(t, 10*time.Millisecond, time.Minute, "the proxy cut a connection mid-fetch",
			func() bool { return proxy.Stats().Cut > 0 }, func() string { return "logs:\n" + b.logs.String() })
		proxy.Heal()
		b.waitIdle(t)
		out := b.lastPassOutput(t, "INBOX")
		require.GreaterOrEqual(t, out["recoveries"], 1.0, "the pass re-established its session: %v", out)
		retried := 0
		for _, j := range dbassert.Jobs(t, b.pool, "folder_pass") {
			if j.Attempt > 1 || j.State != rivertype.JobStateCompleted {
				retried++
			}
		}
		require.Zero(t, retried, "the retrieval pipeline recovered inside the pass; River repeated nothing")
		require.Contains(t, b.logs.String(), "outbound call failed; retry scheduled")
		rows := b.stored(t, "INBOX")
		require.Len(t, rows, len(raws))
		for i, r := range rows {
			sum := sha256.Sum256(raws[i])
			require.Equal(t, sum[:], r.sha)
		}
		assertUnseen(t, b.user, "INBOX")
	})

	t.Run("DisabledOrRemovedAccountStopsAndKeepsItsMail", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		seed(t, b.user, "INBOX", 3, 11)
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "INBOX"), 3)

		coming := []rivertype.JobState{rivertype.JobStateAvailable, rivertype.JobStateScheduled,
			rivertype.JobStateRetryable, rivertype.JobStateRunning}
		pendingRuns := func() int { return dbassert.JobCount(t, b.pool, "account_run", coming...) }
		require.Equal(t, 1, pendingRuns(), "the next run is scheduled")

		b.env["MAILFATHOM_SYNC_ENABLED"] = "false"
		b.start(t)
		b.user.Append("INBOX", mailgen.Message(11, 50, 2000), time.Now())
		b.runAgain(t)
		require.Zero(t, pendingRuns(), "a disabled account schedules no further run")
		require.Len(t, b.stored(t, "INBOX"), 3, "nothing new is fetched and nothing stored is removed")

		// Enabling it again starts it on the next start (once its last run
		// is a minute old).
		b.env["MAILFATHOM_SYNC_ENABLED"] = "true"
		dbassert.BackdateRunStart(t, b.pool, "primary", 2*time.Minute)
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "INBOX"), 4)

		// An account removed from the configuration ends its own runs; the
		// account configured instead starts.
		other := b.server.NewUser()
		pw := filepath.Join(t.TempDir(), "other-password")
		require.NoError(t, os.WriteFile(pw, []byte(other.Password()), 0o600))
		b.env["MAILFATHOM_ACCOUNTS_0_ID"] = "other"
		b.env["MAILFATHOM_ACCOUNTS_0_USERNAME"] = other.Name()
		b.env["MAILFATHOM_ACCOUNTS_0_PASSWORD"] = "file:" + pw
		b.start(t)
		b.runAgain(t)
		primaryRuns := 0
		for _, j := range dbassert.Jobs(t, b.pool, "account_run") {
			if j.Arg("account_id") == "primary" && slices.Contains(coming, j.State) {
				primaryRuns++
			}
		}
		require.Zero(t, primaryRuns)
		require.Equal(t, 1, pendingRuns(), "only the configured account keeps a run scheduled")
		require.Len(t, b.stored(t, "INBOX"), 4)
	})

	t.Run("NoMailContentInLogsOrJobArguments", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "projects"
		b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Projects/2026"
		b.user.Append("Projects/2026", mailgen.Message(10, 1, 2000), time.Now())
		b.start(t)
		b.waitIdle(t)
		require.Len(t, b.stored(t, "PROJECTS"), 1)

		var recorded []string
		for _, j := range dbassert.Jobs(t, b.pool, "") {
			recorded = append(append(recorded, j.Args), j.Errors...)
		}
		args := strings.Join(recorded, " ")
		for _, secret := range []string{"Synthetic message", "example.test", "Projects/2026", b.user.Name(), b.user.Password()} {
			require.NotContains(t, args, secret)
			for _, line := range strings.Split(b.logs.String(), "\n") {
				if strings.Contains(line, "folder alias bound") || strings.Contains(line, "folder alias repointed") {
					continue // the mapping audit record names remote paths by design
				}
				require.NotContains(t, line, secret)
			}
		}
	})
}

func splitHostPort(t *testing.T, addr string) (string, string) {
	t.Helper()
	i := strings.LastIndex(addr, ":")
	require.Positive(t, i, fmt.Sprintf("address %q", addr))
	return addr[:i], addr[i+1:]
}
