package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// pushStoredBound is how long a delivery into a watched folder may take to
// be stored in these tests: far below the 10-minute interval they
// configure, generous next to what push aims for.
const pushStoredBound = 15 * time.Second

// subscribed is the line a watch logs once its subscription is up.
const subscribed = "account watches its folders through one push subscription"

// setupPush configures one push account, "pushed", with the folders INBOX
// and Archive and a 10-minute interval, so a delivery stored within
// seconds was stored because the server reported it.
func setupPush(t testing.TB, opts ...dovecot.Option) (*testBundle, *dovecot.User) {
	t.Helper()
	b := setup(t, dbtest.URL(t), opts...)
	b.env["MAILFATHOM_SYNC_INTERVAL"] = "10m"
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "10m"
	u := b.server.NewUser()
	b.addAccount(t, "pushed", u, folderMapping{"inbox", "INBOX"}, folderMapping{"archive", "Archive"})
	b.env["MAILFATHOM_ACCOUNTS_0_MODE"] = "Push"
	return b, u
}

// deliverAndWait delivers one message into folder from outside MailFathom
// and returns how long it took until alias held want stored messages.
func (b *testBundle) deliverAndWait(t testing.TB, u *dovecot.User, folder, alias string, i, want int) time.Duration {
	t.Helper()
	start := time.Now()
	u.Append(folder, mailgen.Message(91, i, 3000), time.Time{})
	poll.Until(t, pushStoredBound, fmt.Sprintf("delivery %d into %s is stored", i, folder), func() (bool, string) {
		n := len(b.stored(t, "pushed", alias))
		return n >= want, fmt.Sprintf("%d stored", n)
	})
	return time.Since(start)
}

// TestPushFailoverBetweenReplicas: two serve processes share one push
// account; exactly one watch runs at any moment (sampled from river_job and
// from the processes' connections to Dovecot), deliveries are stored
// within seconds, and after the process holding the watch is killed with
// SIGKILL the other takes it over and deliveries are again stored at
// once.
func TestPushFailoverBetweenReplicas(t *testing.T) {
	t.Parallel()
	b, u := setupPush(t)
	p1 := b.start(t, "serve-a")
	p2 := b.start(t, "serve-b")

	var maxRunning, samples atomic.Int64
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Add(1)
	// The sampler runs beside the test's goroutine, so it reads what fails
	// no test, and skips a sample it could not read.
	go func() {
		defer wg.Done()
		for ctx.Err() == nil {
			if watches, err := dbassert.ReadJobs(ctx, b.pool, "watch"); err == nil {
				var running int64
				for _, j := range watches {
					if j.State == rivertype.JobStateRunning {
						running++
					}
				}
				rows := int64(len(watches))
				samples.Add(1)
				if running > maxRunning.Load() {
					maxRunning.Store(running)
				}
				if rows > 1 {
					maxRunning.Store(100 + rows) // a second row is a violation too
				}
			}
			time.Sleep(10 * time.Millisecond) // the sampling pace
		}
	}()
	defer func() { cancel(); wg.Wait() }()

	poll.Until(t, pushStoredBound, "a replica subscribes", func() (bool, string) {
		return p1.count(subscribed)+p2.count(subscribed) > 0, "\n" + tailLines(p1.rawLog(), 20) + "\n" + tailLines(p2.rawLog(), 20)
	})
	holder, other := p1, p2
	if p2.count(subscribed) > 0 {
		holder, other = p2, p1
	}
	first := b.deliverAndWait(t, u, "INBOX", "inbox", 1, 1)
	t.Logf("delivery stored %v after it was made, watched by %s", first, holder.name)

	holder.kill(t)
	killed := time.Now()
	poll.Until(t, time.Minute, other.name+" takes the watch over", func() (bool, string) {
		return other.count(subscribed) > 0, "\n" + tailLines(other.rawLog(), 40)
	})
	failover := time.Since(killed)
	after := b.deliverAndWait(t, u, "Archive", "archive", 2, 1)
	t.Logf("failover: %s subscribed %v after %s was killed; the next delivery was stored %v after it was made", other.name, failover, holder.name, after)
	require.Less(t, failover, 30*time.Second)

	cancel()
	wg.Wait()
	t.Logf("%d samples of river_job", samples.Load())
	require.Greater(t, samples.Load(), int64(100))
	require.Equal(t, int64(1), maxRunning.Load(), "exactly one watch ran at any moment, on one row")
	other.stop(t)
}

// BenchmarkPushLatency measures, for one serve process and a 10-minute
// interval, how long 100 deliveries made one after another (each waits for
// the previous to be stored) take from the delivery's return to the stored
// row, on the subscription path (NOTIFY and IDLE) and on the per-folder
// path (IDLE only); and the idle cost of 20 folders watched one session
// each: the serve process's CPU over a quiet minute, extrapolated to an
// hour, and the connections it holds to Dovecot. It runs on demand only:
//
//	go test -run '^$' -bench PushLatency -benchtime 1x ./internal/e2e
func BenchmarkPushLatency(b *testing.B) {
	const deliveries = 100
	for _, path := range []struct {
		name string
		opts []dovecot.Option
	}{{"subscription", nil}, {"per-folder", []dovecot.Option{dovecot.WithoutMailboxListIndex()}}} {
		b.Run(path.name, func(b *testing.B) {
			for range b.N {
				bundle, u := setupPush(b, path.opts...)
				p := bundle.start(b, "serve")
				p.waitLog(b, "folder is now synchronized in push mode", pushStoredBound)
				time.Sleep(2 * time.Second) // the first passes settle
				var lat []time.Duration
				for i := range deliveries {
					folder, alias := "INBOX", "inbox"
					if i%2 == 1 {
						folder, alias = "Archive", "archive"
					}
					lat = append(lat, bundle.deliverAndWait(b, u, folder, alias, i, i/2+1))
				}
				p.stop(b)
				slices.Sort(lat)
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(ms(lat[len(lat)/2]), "median_ms")
				b.ReportMetric(ms(lat[len(lat)*95/100-1]), "p95_ms")
				b.ReportMetric(ms(lat[len(lat)-1]), "max_ms")
			}
		})
	}
	for _, mode := range []string{"Push", "Polling"} {
		b.Run("idle-20-folders-"+strings.ToLower(mode), func(b *testing.B) { idleCost(b, mode) })
	}
}

// idleCost measures the serve process of one account of 20 folders in mode
// on a server offering IDLE without NOTIFY, once every folder has been
// synchronized: its CPU over a quiet minute, extrapolated to an hour, and
// its connections to Dovecot. Polling is the baseline: River's own polling
// and the maintenance leader's sweeps cost the same in both.
func idleCost(b *testing.B, mode string) {
	for range b.N {
		bundle, u := setupPush(b, dovecot.WithoutMailboxListIndex())
		bundle.env["MAILFATHOM_ACCOUNTS_0_MODE"] = mode
		for j := range 20 {
			name := fmt.Sprintf("Watched%02d", j)
			u.CreateFolder(name)
			bundle.env[fmt.Sprintf("MAILFATHOM_ACCOUNTS_0_FOLDERS_%d_ALIAS", j)] = strings.ToLower(name)
			bundle.env[fmt.Sprintf("MAILFATHOM_ACCOUNTS_0_FOLDERS_%d_REMOTE_PATH", j)] = name
		}
		p := bundle.start(b, "serve")
		poll.Every(b, 50*time.Millisecond, time.Minute, "every folder synchronized and watched", func() bool {
			return (mode != "Push" || p.count("folder is now synchronized in push mode") >= 20) && p.count("folder pass finished") >= 20
		}, func() string { return "\n" + tailLines(p.rawLog(), 30) })
		time.Sleep(5 * time.Second) // the first passes settle
		before, err := readProcStat(p.pid())
		require.NoError(b, err)
		const quiet = time.Minute
		time.Sleep(quiet)
		after, err := readProcStat(p.pid())
		require.NoError(b, err)
		conns := imapConnections(b, p.pid(), bundle.server.TLSPort())
		p.stop(b)
		b.ReportMetric((after.own-before.own).Seconds()*float64(time.Hour/quiet), "cpu_s/h")
		b.ReportMetric(float64(conns), "imap_connections")
	}
}

// imapConnections counts the established TCP connections of process pid to
// port on the loopback, from /proc/<pid>/net/tcp and the process's socket
// descriptors.
func imapConnections(t testing.TB, pid, port int) int {
	t.Helper()
	n, err := tcpConnections(pid, port)
	require.NoError(t, err)
	return n
}
