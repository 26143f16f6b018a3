package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/pgcluster"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/faultproxy"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// The soak's settings: MAILFATHOM_SOAK_DURATION (a Go duration, default
// 2 minutes) is how long mail, changes and faults keep landing;
// MAILFATHOM_SOAK_SEED (an integer, default the clock) makes a run's
// rhythm repeatable.
func soakDuration(t testing.TB) time.Duration {
	d := envDuration(t, "MAILFATHOM_SOAK_DURATION", 2*time.Minute)
	require.GreaterOrEqual(t, d, time.Minute, "MAILFATHOM_SOAK_DURATION")
	return d
}

func soakSeed(t testing.TB) uint64 {
	v := os.Getenv("MAILFATHOM_SOAK_SEED")
	if v == "" {
		return uint64(time.Now().UnixNano())
	}
	s, err := strconv.ParseUint(v, 10, 64)
	require.NoError(t, err, "MAILFATHOM_SOAK_SEED")
	return s
}

// soakAccount is one account of the soak and the folders it configures.
type soakAccount struct {
	id   string
	user *dovecot.User
	// folders are the configured folders; the first is INBOX.
	folders []folderMapping
	erase   bool
	// recreate is the path of the folder the soak deletes and recreates
	// under its alias, "" for none. No change is asked of its mail.
	recreate string
}

// soak is one run: the servers, the two serve replicas, the counts of what
// happened, and the changes asked.
type soak struct {
	t        *testing.T
	seed     uint64
	duration time.Duration
	start    time.Time

	rngMu sync.Mutex
	rng   *rand.Rand

	b       *testBundle
	bin     string
	cluster *pgcluster.Cluster
	pgOpts  pgcluster.Options
	// proxies stand between Dovecot and each account, one per account,
	// so faults can land on one account and its connections be counted.
	proxies    []*faultproxy.Proxy
	proxyPorts []int
	// pending counts faults still being ended in the background.
	pending *sync.WaitGroup
	// rssAfterFirstSync is serve-b's resident set once the first sync
	// is done.
	rssAfterFirstSync int64
	embed             *embedtest.Server
	accounts          []*soakAccount
	uiUser            string
	uiPass            string
	probe             string
	probeSent         atomic.Bool

	replicaMu sync.Mutex
	replicas  [2]*serveProc
	// every process ever started, for the panic check and the logs.
	procs []*serveProc

	// claimed are the Message-IDs of mail MailFathom was asked to change;
	// the other client leaves them alone unless it races on purpose.
	claimMu sync.Mutex
	claimed map[string]bool

	changeMu sync.Mutex
	changes  []*askedChange

	counts soakCounts

	eventMu sync.Mutex
	events  []string
	// nextMessage numbers the delivered messages.
	nextMessage atomic.Int64
}

// soakCounts are what the run did, printed with the verdict.
type soakCounts struct {
	delivered, flagged, moved, expunged, recreated atomic.Int64
	outsideErrors                                  atomic.Int64
	kills, dovecotRestarts, pgRestarts             atomic.Int64
	cuts, stalls, provider500, providerHangs       atomic.Int64
	asks, askErrors                                atomic.Int64
}

func (s *soak) intn(n int) int {
	s.rngMu.Lock()
	defer s.rngMu.Unlock()
	return s.rng.IntN(n)
}

// between returns a duration drawn uniformly from [lo, hi).
func (s *soak) between(lo, hi time.Duration) time.Duration {
	return lo + time.Duration(s.intn(int(hi-lo)))
}

func (s *soak) elapsed() time.Duration { return time.Since(s.start) }

// TestSoak runs everything at once for MAILFATHOM_SOAK_DURATION: three
// accounts (one on push, one polling, one erasing local copies) on one
// Dovecot behind a fault proxy, two serve replicas on one PostgreSQL, the
// test embedding provider; mail delivered, flagged, moved and expunged by
// another client and a folder recreated under its alias; moves, copies,
// deletes and read marks asked through the command line, the HTTP API and
// MCP, some under a repeated request id and some racing the other client;
// and faults: SIGKILL of a replica, Dovecot and PostgreSQL restarts, cuts
// and stalls of the IMAP connections, the provider failing and hanging.
// After a quiet period the mailbox must end exactly as the server says
// (see verdict).
func TestSoak(t *testing.T) {
	t.Parallel()
	s := &soak{t: t, seed: soakSeed(t), duration: soakDuration(t), claimed: map[string]bool{}}
	s.rng = rand.New(rand.NewPCG(s.seed, 0x50a4))
	t.Logf("soak: seed %d (MAILFATHOM_SOAK_SEED), duration %v", s.seed, s.duration)
	s.setUp()
	s.firstSync()

	ctx, stop := context.WithCancel(context.Background())
	var actors sync.WaitGroup
	s.start = time.Now()
	samples := s.sampleBounds(ctx)
	memory := s.sampleMemory(context.Background())
	for _, actor := range []func(context.Context){s.deliverMail, s.changeFromOutside, s.askChanges} {
		actors.Add(1)
		go func() {
			defer actors.Done()
			actor(ctx)
		}()
	}
	s.injectFaults()
	stop()
	actors.Wait()
	bounds := samples()
	s.verdict(bounds, memory)
}

// setUp starts PostgreSQL (a cluster of the soak's own, since it is
// restarted), Dovecot, the fault proxy in front of it, the embedding
// provider, and configures the three accounts.
func (s *soak) setUp() {
	t := s.t
	ctx := context.Background()
	dir, err := os.MkdirTemp("", "mailfathom-soak-")
	require.NoError(t, err)
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o755))
	s.pgOpts = pgcluster.Options{DataDir: filepath.Join(dir, "postgres"), Logf: t.Logf, ListenTCP: true}
	s.cluster, err = pgcluster.Start(ctx, s.pgOpts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.cluster.Stop(context.Background()) })
	s.pgOpts.Port = s.cluster.Port()
	admin, err := newPool(s.cluster.ConnString("postgres"))
	require.NoError(t, err)
	dbassert.CreateDatabase(t, admin, "soak")
	admin.Close()
	// Over TCP, so each replica's PostgreSQL connections can be counted.
	url, err := s.cluster.TCPConnString("soak")
	require.NoError(t, err)

	s.b = setup(t, url)
	s.bin = binary(t)
	s.embed = s.b.withEmbedding(t, embedtest.Options{})
	s.uiUser, s.uiPass = "admin", "soak-ui-password"
	uiPw := filepath.Join(s.b.dir, "ui-password")
	require.NoError(t, os.WriteFile(uiPw, []byte(s.uiPass), 0o600))
	env := s.b.env
	env["MAILFATHOM_UI_ENABLED"] = "true"
	env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPw
	env["MAILFATHOM_SYNC_INTERVAL"] = "10s"
	env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "30s"
	env["MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD"] = "10s"
	env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "20"
	env["MAILFATHOM_SYNC_MAX_RECONCILED_EMAILS_PER_RUN"] = "40"
	env["MAILFATHOM_SYNC_UNKNOWN_MUTATION_OUTCOME_GRACE"] = "1m"
	env["MAILFATHOM_SYNC_WRITE_CONNECTION_IDLE_PERIOD"] = "20s"
	env["MAILFATHOM_EMBEDDING_MAX_BACKLOG"] = "30"
	// Stalls are cut short by the attempt timeouts rather than by the
	// minute a real deployment allows, so a short soak sees them end.
	env["MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_ATTEMPT_TIMEOUT"] = "15s"
	env["MAILFATHOM_RESILIENCE_MAILBOX_DATA_RETRIEVAL_TOTAL_TIMEOUT"] = "1m"
	env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_ATTEMPT_TIMEOUT"] = "5s"
	env["MAILFATHOM_RESILIENCE_AI_PROVIDER_INVOCATION_TOTAL_TIMEOUT"] = "20s"

	mk := func(id string, erase bool, recreate string, folders ...folderMapping) {
		u := s.b.server.NewUser()
		for _, f := range folders[1:] {
			u.CreateFolder(f.remotePath)
		}
		a := &soakAccount{id: id, user: u, folders: folders, erase: erase, recreate: recreate}
		i := s.b.accounts
		s.b.addAccount(t, id, u, folders...)
		proxy := faultproxy.Start(t, s.b.server.TLSAddr())
		s.proxies = append(s.proxies, proxy)
		s.proxyPorts = append(s.proxyPorts, portOf(t, proxy.Addr()))
		p := fmt.Sprintf("MAILFATHOM_ACCOUNTS_%d_", i)
		env[p+"PORT"] = strconv.Itoa(portOf(t, proxy.Addr()))
		if erase {
			env[p+"REMOTELY_DELETED_EMAIL_DISPOSITION"] = "EraseLocalCopy"
		}
		s.accounts = append(s.accounts, a)
	}
	mk("pushed", false, "", folderMapping{"inbox", "INBOX"}, folderMapping{"archive", "Archive"}, folderMapping{"lists", "Lists"})
	env["MAILFATHOM_ACCOUNTS_0_MODE"] = "Push"
	mk("polled", false, "Old", folderMapping{"inbox", "INBOX"}, folderMapping{"work", "Work"}, folderMapping{"old", "Old"})
	mk("erased", true, "", folderMapping{"inbox", "INBOX"}, folderMapping{"receipts", "Receipts"})
	s.probe = fmt.Sprintf("zeppelin quinoa marzipan %d", s.seed%100000)
}

// firstSync seeds every folder with a mailbox's mix of mail (the
// realistic corpus: its sizes reach past a megabyte), starts serve-b — the
// replica never killed, whose memory the verdict follows — and waits until
// every message is stored and embedded, then starts serve-a. serve-b does
// the whole first sync, which is large enough for its heap to have grown
// to its goal once, so the resident set measured after it is the one a
// process keeps, not a smaller one it grows out of (with two replicas an
// account's run and the passes it carries may all land on the other).
func (s *soak) firstSync() {
	t := s.t
	total := 0
	for _, a := range s.accounts {
		for _, f := range a.folders {
			for range 30 {
				require.True(t, s.deliverRaw(a, f.remotePath, mailgen.Realistic(s.seed, int(s.nextMessage.Add(1)))))
				total++
			}
		}
	}
	s.replicas[1] = s.startReplica("serve-b")
	var (
		n   int
		err error
	)
	poll.Every(t, 200*time.Millisecond, 3*time.Minute, "the first sync finished", func() bool {
		n, err = countStored(s.b)
		return err == nil && n >= total && s.b.awaitingVectors(t, "test-model") == 0
	}, func() string { return fmt.Sprintf("%d of %d stored (%v); jobs:\n%s", n, total, err, jobStates(t, s.b)) })
	s.rssAfterFirstSync, err = residentSet(s.replicas[1].pid())
	require.NoError(t, err)
	s.replicas[0] = s.startReplica("serve-a")
	t.Logf("soak: first sync of %d messages done", total)
}

// startReplica starts a serve process; the name of a restarted replica
// gets a counter so every log is kept.
func (s *soak) startReplica(name string) *serveProc {
	s.replicaMu.Lock()
	defer s.replicaMu.Unlock()
	n := 0
	for _, p := range s.procs {
		if strings.HasPrefix(p.name, name) {
			n++
		}
	}
	if n > 0 {
		name = fmt.Sprintf("%s-%d", name, n+1)
	}
	p := startServeWith(s.t, name, s.b.dir, s.b.env, false)
	s.procs = append(s.procs, p)
	return p
}

// replica returns a running replica, preferring i, or nil.
func (s *soak) replica(i int) *serveProc {
	s.replicaMu.Lock()
	defer s.replicaMu.Unlock()
	for k := range 2 {
		p := s.replicas[(i+k)%2]
		if p != nil && p.running() {
			return p
		}
	}
	return nil
}
