package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// Memory targets for many configured accounts: what serve keeps must
// follow the work in flight, not the account list.
const (
	targetBytesPerAccount = 20 << 10
	targetRSSAt1000       = 130 << 20
)

// BenchmarkManyAccounts measures one `mailfathom serve` with default
// bounds against one Dovecot, its login processes in high-performance
// mode, holding N accounts of five small messages each
// (small and alike, so the figures show what an account costs, not what
// its mail does): the time until every account's first run has stored its
// mail, the peak RSS, and the RSS each configured account adds over the
// size before. The first size's round may end before the heap grows to
// its goal, so the per-account figure is reported from the third size on,
// over the second, where every round runs long enough to reach it. It
// logs, beside the machine's load average, the CPU serve, PostgreSQL and
// Dovecot spent per account, the IMAP logins per account with Dovecot's CPU
// per login, and each job kind's timings and snoozes, which
// tell slow units from slots left idle. It runs on demand only:
//
//	go test -run '^$' -bench ManyAccounts -benchtime 1x -timeout 60m ./internal/e2e
//
// MAILFATHOM_BENCH_ACCOUNTS lists the sizes (default 10,100,1000).
func BenchmarkManyAccounts(b *testing.B) {
	var sizes []int
	for _, f := range strings.Split(cmp.Or(os.Getenv("MAILFATHOM_BENCH_ACCOUNTS"), "10,100,1000"), ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "MAILFATHOM_BENCH_ACCOUNTS")
		require.Positive(b, n, "MAILFATHOM_BENCH_ACCOUNTS")
		sizes = append(sizes, n)
	}
	binary(b)
	var prevRSS int64
	var prevAccounts, measured int
	for _, n := range sizes {
		b.Run(fmt.Sprintf("accounts=%d", n), func(b *testing.B) {
			// Login processes as a busy server runs them (see
			// dovecot.WithLoginProcessReuse): otherwise a new process per
			// connection is most of Dovecot's CPU here, a cost of the
			// server's configuration and this machine, not of the client.
			bundle := setup(b, pgtest.Database(b), dovecot.WithLoginProcessReuse())
			const perAccount = 5
			for i := range n {
				u := bundle.server.NewUser()
				seedMessages(b, u, "INBOX", perAccount, func(j int) []byte { return mailgen.Message(uint64(i), j, 3000) })
				bundle.addAccount(b, fmt.Sprintf("acct-%d", i), u)
			}
			bundle.env["MAILFATHOM_SYNC_INTERVAL"] = "5m"
			migrate(b, bundle.dbURL)

			var rss int64
			var round time.Duration
			for i := range b.N {
				if i > 0 {
					dbassert.TruncateStoredEmails(b, bundle.pool)
				}
				meter := accountsMeter(b, bundle)
				logins0 := strings.Count(bundle.server.Log(), loginLine)
				start := time.Now()
				p := startServe(b, fmt.Sprintf("serve-%d", i), bundle.dir, bundle.env)
				poll.Every(b, 50*time.Millisecond, 20*time.Minute, "the round finished", func() bool {
					if bundle.storedCount(b) >= n*perAccount {
						return true
					}
					require.True(b, p.running(), "serve exited:\n%s", tailLines(p.rawLog(), 40))
					return false
				}, func() string { return "\n" + tailLines(p.rawLog(), 40) })
				round += time.Since(start)
				peak, err := p.peakRSS()
				require.NoError(b, err)
				use, err := meter.read(p.pid())
				require.NoError(b, err)
				var scheduled time.Duration
				for _, l := range p.logLines() {
					if l.msg() == "synchronization scheduled" {
						at, _ := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"]))
						scheduled = at.Sub(start)
					}
				}
				logins := strings.Count(bundle.server.Log(), loginLine) - logins0
				ms := func(d time.Duration) float64 { return float64(d.Milliseconds()) / float64(n) }
				b.Logf("%d accounts, round %d: %.1f s, every account's run scheduled after %.1f s (load average %s); CPU: %s; per account: serve %.0f ms, PostgreSQL %.0f ms, Dovecot %.0f ms; IMAP logins: %.2f per account, %.0f ms of Dovecot CPU each\n%s",
					n, i, time.Since(start).Seconds(), scheduled.Seconds(), loadAverage(), use, ms(use.serve), ms(use.postgres), ms(use.dovecot),
					float64(logins)/float64(n), float64(use.dovecot.Milliseconds())/float64(max(logins, 1)), bundle.jobTimings(b, start))
				rss = max(rss, peak)
				p.stop(b)
			}
			b.ReportMetric(round.Seconds()/float64(b.N), "round_s")
			b.ReportMetric(float64(rss)/(1<<20), "peak_rss_MiB")
			defer func() { prevRSS, prevAccounts, measured = rss, n, measured+1 }()
			// The first size's round ends before the heap reaches its goal,
			// so its RSS is no base for a per-account figure.
			if measured < 2 || n <= prevAccounts {
				b.Logf("%d accounts: one round in %.1f s, peak RSS %.1f MiB", n, round.Seconds()/float64(b.N), float64(rss)/(1<<20))
				return
			}
			per := float64(rss-prevRSS) / float64(n-prevAccounts)
			b.ReportMetric(per/1024, "KB_per_account")
			b.Logf("%d accounts: one round in %.1f s, peak RSS %.1f MiB, %.1f KB per account over %d accounts (target %d KB: %s)%s",
				n, round.Seconds()/float64(b.N), float64(rss)/(1<<20), per/1024, prevAccounts, targetBytesPerAccount>>10, verdict(per <= targetBytesPerAccount),
				map[bool]string{true: fmt.Sprintf("; peak RSS target at 1000 accounts %d MiB: %s", targetRSSAt1000>>20, verdict(rss <= targetRSSAt1000)), false: ""}[n == 1000])
		})
	}
}

// loginLine starts the line Dovecot logs for each login over the network
// (the harness's own helper sessions are preauthenticated and log none).
const loginLine = "imap-login: Info: Login: user=<"

// accountsMeter measures the CPU of serve, PostgreSQL and Dovecot during a
// round.
func accountsMeter(b *testing.B, bundle *testBundle) *cpuMeter {
	m, err := newCPUMeter(dbassert.Setting(b, bundle.pool, "data_directory"), bundle.server.Dir())
	require.NoError(b, err)
	return m
}

// loadAverage is the machine's one-, five- and fifteen-minute load.
func loadAverage() string {
	raw, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(raw))
	return strings.Join(f[:min(3, len(f))], " ")
}

// jobTimings summarises each job kind of the round: how many jobs, how
// often they were snoozed, and when the first attempt began and the last
// job was finalized, counted from start.
func (b *testBundle) jobTimings(t testing.TB, start time.Time) string {
	t.Helper()
	type timing struct {
		jobs, finalized, snoozes int
		// first is the first attempt's start, last the last finalization,
		// both from start; took sums, over the finalized jobs attempted,
		// their last attempt to their finalization, counted in ran.
		first, last *time.Duration
		took        time.Duration
		ran         int
	}
	earliest := func(d **time.Duration, at time.Duration) {
		if *d == nil || at < **d {
			*d = &at
		}
	}
	latest := func(d **time.Duration, at time.Duration) {
		if *d == nil || at > **d {
			*d = &at
		}
	}
	byKind := map[string]*timing{}
	for _, j := range dbassert.Jobs(t, b.pool, "") {
		k := byKind[j.Kind]
		if k == nil {
			k = &timing{}
			byKind[j.Kind] = k
		}
		k.jobs++
		var metadata struct {
			Snoozes int `json:"snoozes"`
		}
		_ = json.Unmarshal([]byte(j.Metadata), &metadata)
		k.snoozes += metadata.Snoozes
		if j.AttemptedAt != nil {
			earliest(&k.first, j.AttemptedAt.Sub(start))
		}
		if j.FinalizedAt != nil {
			k.finalized++
			latest(&k.last, j.FinalizedAt.Sub(start))
			if j.AttemptedAt != nil {
				k.took += j.FinalizedAt.Sub(*j.AttemptedAt)
				k.ran++
			}
		}
	}
	seconds := func(d *time.Duration) float64 {
		if d == nil {
			return 0
		}
		return d.Seconds()
	}
	var out strings.Builder
	for _, kind := range slices.Sorted(maps.Keys(byKind)) {
		k := byKind[kind]
		avg := 0.0
		if k.ran > 0 {
			avg = k.took.Seconds() / float64(k.ran)
		}
		fmt.Fprintf(&out, "  %-22s %5d jobs, %5d finalized, %6d snoozes; first attempt %.1f s, last finalized %.1f s, last attempt to finalized %.3f s on average\n",
			kind, k.jobs, k.finalized, k.snoozes, seconds(k.first), seconds(k.last), avg)
	}
	return out.String()
}
