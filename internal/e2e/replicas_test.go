package e2e

import (
	"context"
	"fmt"
	"hash/fnv"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
)

// The advisory-lock namespaces of package slots (see its documentation):
// the high 16 bits of each 64-bit key.
const (
	nsSlot   = 0x6d02 // (nsSlot, 0, n): account slot n, shared by the account's work units
	nsMember = 0x6d03 // (nsMember, fnv32a(account key), 0): "this backend works for the account"
	nsFolder = 0x6d04 // (nsFolder, fnv32a(account key), j): folder slot j of the account, exclusive
)

// TestTwoReplicasRespectBounds runs two `mailfathom serve` processes with the
// same configuration against one database while they synchronize five
// accounts of two folders each, samples PostgreSQL's lock table and River's
// jobs every ~10 ms, and checks that the concurrency bounds hold across both
// processes: at most MaxConcurrentAccounts accounts hold a slot, at most
// MaxConcurrentFoldersPerAccount folder slots per account are held, and no
// folder is passed by two jobs at once. It then checks that all mail is
// stored exactly once.
func TestTwoReplicasRespectBounds(t *testing.T) {
	t.Parallel()
	const (
		accounts          = 5
		perFolder         = 300
		maxAccounts       = 2
		maxFoldersPerAcct = 1
	)
	b := setup(t, dbtest.URL(t))
	b.env["MAILFATHOM_SYNC_MAX_CONCURRENT_ACCOUNTS"] = fmt.Sprint(maxAccounts)
	b.env["MAILFATHOM_SYNC_MAX_CONCURRENT_FOLDERS_PER_ACCOUNT"] = fmt.Sprint(maxFoldersPerAcct)
	// One account run at a time in each process: the account bound, two
	// across the processes, is reached only while both work. With the
	// default (as many as the bound) the process that finished a run was
	// first to claim the next, and on a loaded machine one process did
	// every run while the other, started a moment later, found none.
	b.env["MAILFATHOM_QUEUE_ACCOUNTS_WORKERS"] = "1"
	// Passes of 100 messages: each folder takes three passes, so passes of
	// both processes interleave and contend for the slots many times.
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "50"
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCHES_PER_RUN"] = "2"

	type mailbox struct {
		id             string
		user           *dovecot.User
		inbox, archive corpus
	}
	var boxes []mailbox
	names := map[uint32]string{} // account hash → id, for messages
	for i := range accounts {
		id := fmt.Sprintf("replica-%d", i)
		u := b.server.NewUser()
		box := mailbox{id: id, user: u,
			inbox:   seedCorpus(t, u, "INBOX", perFolder, uint64(100+i), 8),
			archive: seedCorpus(t, u, "Archive", perFolder, uint64(200+i), 8),
		}
		boxes = append(boxes, box)
		b.addAccount(t, id, u, folderMapping{"inbox", "INBOX"}, folderMapping{"archive", "Archive"})
		names[fnv32a(strings.ToLower(id))] = id
	}
	t.Logf("each of %d accounts: INBOX %s; Archive %s", accounts, boxes[0].inbox, boxes[0].archive)

	obs := observe(t, b.dbURL, names, maxAccounts, maxFoldersPerAcct)
	p1 := b.start(t, "serve-a")
	p2 := b.start(t, "serve-b")
	b.waitSynced(t, p1, accounts*2*perFolder, 3*time.Minute)
	// While both run, exactly one of them leads the maintenance.
	const leads = "this process leads the maintenance: it sweeps work whose process stopped"
	require.Equal(t, 1, p1.count(leads)+p2.count(leads), "one maintenance leader")
	report := obs.stop()
	p1.stop(t)
	p2.stop(t)

	t.Logf("%d samples: at most %d accounts and %d folder slots per account held at once, at most %d connections of the two processes",
		report.samples, report.maxAccounts, report.maxFoldersPerAccount, report.maxConnections)
	require.Empty(t, report.violations, "bounds violated:\n%s", strings.Join(report.violations, "\n"))
	require.Greater(t, report.samples, 100, "the sampler observed the sync")
	require.Equal(t, maxAccounts, report.maxAccounts, "the account bound was reached, so it was tested")
	// Each process's pool holds at most MAILFATHOM_DATABASE_MAX_CONNECTIONS
	// (default 10) connections, or, when more, what its workers need: one
	// per account worker (MAX_CONCURRENT_ACCOUNTS), two per folder worker
	// (accounts × folders per account), and five for River and the
	// liveness lock.
	perProcess := max(10, maxAccounts+2*maxAccounts*maxFoldersPerAcct+5)
	require.LessOrEqual(t, report.maxConnections, 2*perProcess, "connection use stays bounded")

	// The same from the processes' own accounts of their passes: no two
	// passes of one account (so of one folder) overlap in time.
	passes := append(passIntervals(t, p1), passIntervals(t, p2)...)
	requireNoOverlap(t, passes, maxAccounts, maxFoldersPerAcct)
	// Both processes take part: each runs one account at a time, and the
	// bound of two was reached.
	for _, p := range []*serveProc{p1, p2} {
		n := p.count("folder pass finished")
		t.Logf("%s finished %d folder passes", p.name, n)
		require.Positive(t, n, "%s did some of the work", p.name)
	}

	// River holds only synchronization work: no housekeeping rows.
	var kinds []string
	for _, j := range dbassert.Jobs(t, b.pool, "") {
		if !slices.Contains(kinds, j.Kind) {
			kinds = append(kinds, j.Kind)
		}
	}
	require.Subset(t, []string{"account_run", "extraction_backfill", "folder_pass", "reconcile_window"}, kinds)

	for _, box := range boxes {
		b.requireStored(t, box.id, "inbox", box.user, box.inbox)
		b.requireStored(t, box.id, "archive", box.user, box.archive)
		requireUnseen(t, box.user, "INBOX", box.inbox)
		requireUnseen(t, box.user, "Archive", box.archive)
	}
}

func fnv32a(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}

// observer samples the lock table and River's jobs until stopped.
type observer struct {
	cancel context.CancelFunc
	done   chan struct{}
	report observation
}

type observation struct {
	samples              int
	maxAccounts          int
	maxFoldersPerAccount int
	maxConnections       int
	violations           []string
}

// observe starts sampling the database at dbURL every ~10 ms on a
// connection of its own (application_name e2e-observer, left out of the
// connection count). It samples beside the test's goroutine, so it reads
// what fails no test and records a failed sample as a violation.
func observe(t testing.TB, dbURL string, names map[uint32]string, maxAccounts, maxFolders int) *observer {
	t.Helper()
	cfg, err := pgx.ParseConfig(dbURL)
	require.NoError(t, err)
	cfg.RuntimeParams["application_name"] = "e2e-observer"
	conn, err := pgx.ConnectConfig(context.Background(), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	o := &observer{cancel: cancel, done: make(chan struct{})}
	t.Cleanup(func() { cancel(); <-o.done })
	go func() {
		defer close(o.done)
		defer conn.Close(context.Background())
		for ctx.Err() == nil {
			if err := o.sample(ctx, conn, names, maxAccounts, maxFolders); err != nil && ctx.Err() == nil {
				o.report.violations = append(o.report.violations, "sampling failed: "+err.Error())
				return
			}
			time.Sleep(10 * time.Millisecond) // the sampling pace
		}
	}()
	return o
}

func (o *observer) stop() observation {
	o.cancel()
	<-o.done
	return o.report
}

func (o *observer) sample(ctx context.Context, conn *pgx.Conn, names map[uint32]string, maxAccounts, maxFolders int) error {
	locks, err := dbassert.ReadHeldAdvisoryLocks(ctx, conn)
	if err != nil {
		return err
	}
	now := time.Now().Format("15:04:05.000")
	name := func(h uint32) string {
		if n, ok := names[h]; ok {
			return n
		}
		return fmt.Sprintf("account#%08x", h)
	}
	members := map[uint32][]int32{} // account → backends working for it
	slotOf := map[int32]int{}       // backend → account slot it holds
	folders := map[uint32][]int{}   // account → folder slots held
	for _, l := range locks {
		ns, h, n := uint16(uint64(l.Key)>>48), uint32(uint64(l.Key)>>16), int(uint16(l.Key))
		switch ns {
		case nsMember:
			members[h] = append(members[h], l.PID)
		case nsSlot:
			slotOf[l.PID] = n
			if n >= maxAccounts {
				o.violate("%s: account slot %d held, beyond MaxConcurrentAccounts %d", now, n, maxAccounts)
			}
		case nsFolder:
			folders[h] = append(folders[h], n)
			if n >= maxFolders {
				o.violate("%s: folder slot %d of %s held, beyond MaxConcurrentFoldersPerAccount %d", now, n, name(h), maxFolders)
			}
		}
	}
	// An account holds a slot while one of its backends holds both its
	// membership and an account slot. (Acquire takes the folder slot, then
	// the account slot, then the membership; Release gives them back in the
	// same order, so a backend may hold a membership alone for a moment.)
	holding := map[uint32]int{} // account → its slot
	for h, pids := range members {
		for _, pid := range pids {
			s, ok := slotOf[pid]
			if !ok {
				continue
			}
			if prev, seen := holding[h]; seen && prev != s {
				o.violate("%s: %s occupies account slots %d and %d at once", now, name(h), prev, s)
			}
			holding[h] = s
		}
	}
	if len(holding) > maxAccounts {
		var held []string
		for h, s := range holding {
			held = append(held, fmt.Sprintf("%s@%d", name(h), s))
		}
		sort.Strings(held)
		o.violate("%s: %d accounts hold a slot (%v), bound %d", now, len(holding), held, maxAccounts)
	}
	bySlot := map[int]uint32{}
	for h, s := range holding {
		if other, ok := bySlot[s]; ok {
			o.violate("%s: %s and %s share account slot %d", now, name(h), name(other), s)
		}
		bySlot[s] = h
	}
	for h, held := range folders {
		if len(held) > maxFolders {
			o.violate("%s: %s holds %d folder slots %v, bound %d", now, name(h), len(held), held, maxFolders)
		}
		o.report.maxFoldersPerAccount = max(o.report.maxFoldersPerAccount, len(held))
	}
	o.report.maxAccounts = max(o.report.maxAccounts, len(holding))

	// River: at most one running pass per (account, alias).
	passes, err := dbassert.ReadJobs(ctx, conn, "folder_pass")
	if err != nil {
		return err
	}
	type folder struct{ account, alias string }
	running := map[folder]int{}
	for _, j := range passes {
		if j.State == rivertype.JobStateRunning {
			running[folder{fmt.Sprint(j.Arg("account_id")), fmt.Sprint(j.Arg("alias"))}]++
		}
	}
	for f, n := range running {
		if n > 1 {
			o.violate("%s: %d folder passes of %s/%s running at once", now, n, f.account, f.alias)
		}
	}

	conns, err := dbassert.ReadClientConnections(ctx, conn, "e2e-observer")
	if err != nil {
		return err
	}
	o.report.maxConnections = max(o.report.maxConnections, conns)
	o.report.samples++
	return nil
}

func (o *observer) violate(format string, args ...any) {
	if len(o.report.violations) < 50 {
		o.report.violations = append(o.report.violations, fmt.Sprintf(format, args...))
	}
}

// passInterval is one folder pass as its process logged it.
type passInterval struct {
	process, account, alias string
	start, end              time.Time
}

// passIntervals reads the folder passes a process finished (or ended early)
// from its log: each record carries its end time and the pass's duration.
func passIntervals(t testing.TB, p *serveProc) []passInterval {
	t.Helper()
	var out []passInterval
	for _, l := range p.logLines() {
		if l.msg() != "folder pass finished" && l.msg() != "folder pass ended early" {
			continue
		}
		end, err := time.Parse(time.RFC3339Nano, fmt.Sprint(l["time"]))
		require.NoError(t, err)
		d, ok := l.duration("duration")
		require.True(t, ok, "a pass record carries its duration: %v", l)
		out = append(out, passInterval{
			process: p.name, account: fmt.Sprint(l["account"]), alias: fmt.Sprint(l["alias"]),
			start: end.Add(-time.Duration(d)), end: end,
		})
	}
	return out
}

// requireNoOverlap asserts that passes of no more than maxAccounts accounts,
// no more than maxFolders passes of one account, and never two of one
// folder were under way at any moment.
func requireNoOverlap(t testing.TB, passes []passInterval, maxAccounts, maxFolders int) {
	t.Helper()
	for _, p := range passes {
		accounts := map[string]bool{p.account: true}
		for _, q := range passes {
			if q.start.Before(p.start) && q.end.After(p.start) {
				accounts[q.account] = true
			}
		}
		require.LessOrEqual(t, len(accounts), maxAccounts, "accounts with a pass under way at %v: %v", p.start.Format("15:04:05.000"), accounts)
	}
	byAccount := map[string][]passInterval{}
	for _, p := range passes {
		byAccount[p.account] = append(byAccount[p.account], p)
	}
	for account, ps := range byAccount {
		sort.Slice(ps, func(i, j int) bool { return ps[i].start.Before(ps[j].start) })
		for i, p := range ps {
			concurrent := 1
			for _, q := range ps[:i] {
				if q.end.After(p.start) {
					concurrent++
					require.False(t, q.alias == p.alias,
						"two passes of %s/%s overlap: %s %v–%v and %s %v–%v", account, p.alias,
						q.process, q.start.Format("15:04:05.000"), q.end.Format("15:04:05.000"),
						p.process, p.start.Format("15:04:05.000"), p.end.Format("15:04:05.000"))
				}
			}
			require.LessOrEqual(t, concurrent, maxFolders, "passes of %s under way at %v", account, p.start.Format("15:04:05.000"))
		}
	}
}
