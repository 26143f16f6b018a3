package e2e

import (
	"cmp"
	"context"
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// Connection bounds the verdict holds the replicas to. Per account, both
// replicas together: one listing, MAX_CONCURRENT_FOLDERS_PER_ACCOUNT (1)
// folder unit, one write connection, and the watch — one subscription, or
// one session per folder should the server decline it.
func imapBound(a *soakAccount) int {
	watch := 0
	if a.id == "pushed" {
		watch = len(a.folders)
	}
	return 1 + 1 + 1 + watch
}

// pgBound is the most PostgreSQL connections one replica may hold: its
// pool — MAILFATHOM_DATABASE_MAX_CONNECTIONS (10), raised to what its
// workers hold at once: an account run's connection per account worker
// (MAX_CONCURRENT_ACCOUNTS, 4), two per folder worker (4), and 5 for River
// and the liveness lock —, River's listener (a connection taken out of the
// pool), and one connection of its own per account whose write connection
// it holds (3).
const pgBound = max(10, 4+2*4+5) + 1 + 3

// storedOccurrence is one stored row of an account's folder.
type storedOccurrence struct {
	uidValidity uint32
	uid         uint32
	flags       []string
	sha         []byte
	served      bool
}

// storedOf reads every stored occurrence of a's alias (every generation of
// its binding). It fails no test: the verdict reads through a database
// that does not answer yet.
func (s *soak) storedOf(ctx context.Context, a *soakAccount, alias string) ([]storedOccurrence, error) {
	stored, err := dbassert.ReadOccurrences(ctx, s.b.pool, strings.ToUpper(alias))
	if err != nil {
		return nil, err
	}
	var out []storedOccurrence
	for _, o := range stored {
		if o.Account != a.id {
			continue
		}
		flags := slices.Clone(o.Flags)
		slices.Sort(flags)
		out = append(out, storedOccurrence{uidValidity: o.UIDValidity, uid: o.UID, flags: flags, sha: o.ContentSHA256, served: o.Served})
	}
	return out, nil
}

// mailboxDiffs compares every folder of every account with the server and
// returns what differs, empty when the stored mail is exactly the
// server's: every message the server holds served once per occurrence,
// byte for byte, with the server's flags; every message it no longer holds
// not served, and, for the account that erases local copies, not stored
// at all.
func (s *soak) mailboxDiffs(ctx context.Context) ([]string, int, error) {
	var diffs []string
	held := 0
	for _, a := range s.accounts {
		snap, err := s.snapshot(a)
		if err != nil {
			return nil, 0, err
		}
		for _, f := range a.folders {
			sf := snap[f.alias]
			rows, err := s.storedOf(ctx, a, f.alias)
			if err != nil {
				return nil, 0, err
			}
			where := a.id + "/" + f.alias
			seen := map[uint32]int{}
			for _, o := range rows {
				onServer := o.uidValidity == sf.uidValidity
				m, exists := sf.messages[o.uid]
				onServer = onServer && exists
				switch {
				case o.served && !onServer:
					diffs = append(diffs, fmt.Sprintf("%s: UID %d (UIDVALIDITY %d) is served but the server no longer holds it", where, o.uid, o.uidValidity))
				case !o.served && onServer:
					diffs = append(diffs, fmt.Sprintf("%s: UID %d is on the server but not served", where, o.uid))
				case !o.served && a.erase && o.uidValidity == sf.uidValidity:
					diffs = append(diffs, fmt.Sprintf("%s: UID %d left the server and is kept, on an account that erases local copies", where, o.uid))
				}
				if !onServer || !o.served {
					continue
				}
				seen[o.uid]++
				if len(o.sha) != sha256.Size || [sha256.Size]byte(o.sha) != m.sha {
					diffs = append(diffs, fmt.Sprintf("%s: UID %d is stored with other bytes than the server's", where, o.uid))
				}
				if !slices.Equal(o.flags, m.flags) {
					diffs = append(diffs, fmt.Sprintf("%s: UID %d has flags %v stored, %v on the server", where, o.uid, o.flags, m.flags))
				}
			}
			for uid := range sf.messages {
				held++
				switch seen[uid] {
				case 1:
				case 0:
					if !slices.ContainsFunc(rows, func(o storedOccurrence) bool { return o.uid == uid && o.uidValidity == sf.uidValidity }) {
						diffs = append(diffs, fmt.Sprintf("%s: UID %d is on the server and not stored", where, uid))
					}
				default:
					diffs = append(diffs, fmt.Sprintf("%s: UID %d is served %d times", where, uid, seen[uid]))
				}
			}
		}
	}
	slices.Sort(diffs)
	return diffs, held, nil
}

// verdict waits out the quiet period — until the stored mail equals the
// server's, every change has ended and the queues have drained, or the
// period's bound passes — and then judges the run. Every judgement is a
// hard assertion, and each is made however the others went, so a long run
// reports everything it found; the figures are printed first.
func (s *soak) verdict(bounds boundSamples, memory func() []memorySample) {
	t := s.t
	ctx := context.Background()
	c := &s.counts
	t.Logf("soak: seed %d, %v; delivered %d, outside flags %d, moves %d, expunges %d, folder recreations %d (outside errors %d); "+
		"kills %d, Dovecot restarts %d, PostgreSQL restarts %d, cuts %d, stalls %d, provider 500 %d, provider hangs %d; "+
		"changes asked %d (%d askings, %d failed)",
		s.seed, s.duration, c.delivered.Load(), c.flagged.Load(), c.moved.Load(), c.expunged.Load(), c.recreated.Load(), c.outsideErrors.Load(),
		c.kills.Load(), c.dovecotRestarts.Load(), c.pgRestarts.Load(), c.cuts.Load(), c.stalls.Load(), c.provider500.Load(), c.providerHangs.Load(),
		len(s.changes), c.asks.Load(), c.askErrors.Load())
	t.Logf("soak: %s", bounds)

	// A replica that is not serving at the end fails the verdict; it is
	// started again so that the rest of the verdict is still judged.
	for i, name := range []string{"serve-a", "serve-b"} {
		s.replicaMu.Lock()
		p := s.replicas[i]
		s.replicaMu.Unlock()
		if !assert.True(t, p != nil && p.running(), "%s serves at the end", name) {
			np := s.startReplica(name)
			s.replicaMu.Lock()
			s.replicas[i] = np
			s.replicaMu.Unlock()
		}
	}
	quietStart := time.Now()
	quietBound := 2*time.Minute + s.duration/10
	var diffs []string
	var held int
	var unsettled []string
	// Soft: the verdict goes on whether or not the run fell quiet, and
	// judges the differences and what is unsettled below.
	poll.Soft(t, 2*time.Second, quietBound, "the run falls quiet", func() (bool, string) {
		var err error
		diffs, held, err = s.mailboxDiffs(ctx)
		if err == nil {
			unsettled, err = s.unsettled(ctx)
		}
		return err == nil && len(diffs) == 0 && len(unsettled) == 0,
			fmt.Sprintf("%d differences, %d unsettled (error: %v)", len(diffs), len(unsettled), err)
	})
	t.Logf("soak: quiet period %v; the server holds %d messages in the configured folders", time.Since(quietStart).Round(time.Second), held)

	outcomes := s.changeOutcomes(ctx)
	t.Logf("soak: changes: %s", outcomes.summary)
	jobs := s.jobSummary(ctx)
	t.Logf("soak: jobs: %s", jobs)

	s.keepLogs()
	if len(diffs) > 0 {
		t.Logf("soak: what MailFathom recorded of each difference:\n%s", s.explain(ctx, diffs))
	}
	mem := memory()
	for _, m := range mem {
		t.Logf("soak: serve-b at %s", m)
	}
	assert.Empty(t, diffs, "the stored mail is exactly the server's")
	assert.Empty(t, unsettled, "every change ended and the queues drained")
	assert.Empty(t, outcomes.violations, "every change ended as asked, once")
	for i, a := range s.accounts {
		assert.LessOrEqual(t, bounds.imap[a.id], imapBound(a), "IMAP connections of %s (through proxy %d)", a.id, i)
	}
	assert.LessOrEqual(t, bounds.pg, pgBound, "PostgreSQL connections of one replica")
	s.requireNoPanic()
	s.requireMemory()
	s.requireEmbedded(ctx)
	s.requireProbeFound()
}

// unsettled lists what keeps the run from being quiet: changes not ended,
// jobs waiting to run now, jobs waiting for a retry (the queues have not
// drained while any does), jobs running past their time.
func (s *soak) unsettled(ctx context.Context) ([]string, error) {
	var out []string
	for _, state := range []mailstore.MutationState{mailstore.MutationPending, mailstore.MutationConverging} {
		unended, err := mailstore.ListMutations(ctx, s.b.pool, mailstore.MutationFilter{State: state, Limit: math.MaxInt32})
		if err != nil {
			return nil, err
		}
		for _, m := range unended {
			out = append(out, fmt.Sprintf("mutation %s %s at %s (%s)", m.Kind, m.State, m.Stage, m.FailureCode))
		}
	}
	waiting, err := dbassert.ReadJobs(ctx, s.b.pool, "", rivertype.JobStateAvailable, rivertype.JobStateRetryable, rivertype.JobStateRunning,
		rivertype.JobStatePending)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	for _, j := range waiting {
		switch {
		case j.State == rivertype.JobStateAvailable && j.ScheduledAt.Before(now.Add(-30*time.Second)),
			j.State == rivertype.JobStateRetryable,
			j.State == rivertype.JobStateRunning && j.Kind != "watch" && j.AttemptedAt != nil && j.AttemptedAt.Before(now.Add(-10*time.Minute)),
			// A carried job its carrier neither ran nor handed back.
			j.State == rivertype.JobStatePending && j.CreatedAt.Before(now.Add(-10*time.Minute)):
			out = append(out, fmt.Sprintf("job %s %s attempt %d", j.Kind, j.State, j.Attempt))
		}
	}
	return out, nil
}

// changeSummary is what became of the changes asked.
type changeSummary struct {
	summary    string
	violations []string
}

// changeOutcomes judges every change asked: it ended completed or
// dead-lettered with a code; asked several times under one request id it
// is one change; completed, it is true on the server (unless the other
// client raced it on purpose), and happened once.
func (s *soak) changeOutcomes(ctx context.Context) changeSummary {
	var out changeSummary
	byOutcome := map[string]int{}
	snaps := map[*soakAccount]map[string]serverFolder{}
	for _, a := range s.accounts {
		snap, err := s.snapshot(a)
		if err != nil {
			out.violations = append(out.violations, "snapshot: "+err.Error())
			return out
		}
		snaps[a] = snap
	}
	// count returns how many messages with messageID alias holds.
	count := func(a *soakAccount, alias, messageID string) int {
		n := 0
		for _, m := range snaps[a][alias].messages {
			if m.messageID == messageID {
				n++
			}
		}
		return n
	}
	// touched reports whether the other client acted on messageID at any
	// time: the stored copy a change was asked of may have been behind the
	// server, so such a change raced the other client without meaning to.
	touched := func(messageID string) bool {
		s.eventMu.Lock()
		defer s.eventMu.Unlock()
		for _, e := range s.events {
			if strings.Contains(e, " outside ") && !strings.Contains(e, "outside delivers") && strings.Contains(e, messageID) {
				return true
			}
		}
		return false
	}
	for _, ch := range s.changes {
		if !ch.racing && touched(ch.messageID) {
			ch.racing = true
		}
		where := fmt.Sprintf("%s %s of %s/%s under %s via %v", ch.kind, ch.emailID, ch.account.id, ch.source, ch.requestID, ch.via)
		if ids := slices.Compact(slices.Sorted(slices.Values(ch.mutationIDs))); len(ids) != 1 {
			out.violations = append(out.violations, fmt.Sprintf("%s: asked %d times, answered %v", where, len(ch.mutationIDs), ch.mutationIDs))
			continue
		}
		m, err := s.mutation(ctx, ch.mutationIDs[0])
		if err != nil {
			stored, serr := s.stored(ctx, ch.emailID)
			if serr == nil && ch.account.erase && !stored {
				// A record is removed with the email it describes, and an
				// account that erases local copies erased this one: its
				// own delete, or someone else's removal of the message.
				byOutcome[ch.kind+" record erased with its email"]++
				continue
			}
			out.violations = append(out.violations, fmt.Sprintf("%s: no record: %v", where, err))
			continue
		}
		state, code := string(m.State), m.FailureCode
		unjoined := m.Path != "" && m.PlacedUID == 0 && m.State == mailstore.MutationCompleted && m.Kind.Places()
		key := ch.kind + " " + state
		if code != "" {
			key += " " + code
		}
		if unjoined {
			key += " unjoined"
		}
		if ch.racing {
			key += " (raced)"
		}
		byOutcome[key]++
		switch state {
		case "Completed":
		case "DeadLettered":
			if code == "" {
				out.violations = append(out.violations, where+": dead-lettered without a code")
			}
			continue
		default:
			out.violations = append(out.violations, fmt.Sprintf("%s: ended %s", where, state))
			continue
		}
		inSource, inDest := count(ch.account, ch.source, ch.messageID), 0
		if ch.dest != "" {
			inDest = count(ch.account, ch.dest, ch.messageID)
		}
		if ch.racing {
			// Its end state is the race's; it still happened at most once.
			if inDest > 1 {
				out.violations = append(out.violations, fmt.Sprintf("%s: raced, and the destination holds it %d times", where, inDest))
			}
			continue
		}
		var wrong string
		switch ch.kind {
		case "move":
			if inSource != 0 || inDest != 1 {
				wrong = "moved"
			}
		case "copy":
			if inSource != 1 || inDest != 1 {
				wrong = "copied once"
			}
		case "delete":
			if inSource != 0 {
				wrong = "deleted"
			}
		case "mark-read", "mark-unread":
			want := ch.kind == "mark-read"
			for _, m := range snaps[ch.account][ch.source].messages {
				if m.messageID == ch.messageID && slices.Contains(m.flags, `\Seen`) != want {
					wrong = "marked"
				}
			}
			if inSource != 1 {
				wrong = "kept in its folder"
			}
		}
		if wrong != "" {
			out.violations = append(out.violations, fmt.Sprintf("%s: completed, but the server shows it not %s (%d in the source, %d in the destination)", where, wrong, inSource, inDest))
		}
	}
	var keys []string
	for k, n := range byOutcome {
		keys = append(keys, fmt.Sprintf("%s=%d", k, n))
	}
	slices.Sort(keys)
	out.summary = strings.Join(keys, ", ")
	return out
}

// mutation reads the change id, and an error when it is not recorded.
func (s *soak) mutation(ctx context.Context, id string) (mailstore.Mutation, error) {
	parsed, err := uuid.Parse(id)
	if err != nil {
		return mailstore.Mutation{}, err
	}
	m, ok, err := mailstore.ReadMutation(ctx, s.b.pool, parsed)
	if err == nil && !ok {
		err = fmt.Errorf("mutation %s is not recorded", id)
	}
	return m, err
}

// stored reports whether the email id is stored.
func (s *soak) stored(ctx context.Context, id string) (bool, error) {
	parsed, err := uuid.Parse(id)
	if err != nil {
		return false, err
	}
	_, ok, err := mailstore.ReadMutableEmail(ctx, s.b.pool, parsed)
	return ok, err
}

// jobSummary counts River's jobs by kind and state.
func (s *soak) jobSummary(ctx context.Context) string {
	jobs, err := dbassert.ReadJobs(ctx, s.b.pool, "")
	if err != nil {
		return err.Error()
	}
	type group struct {
		kind  string
		state rivertype.JobState
	}
	count, attempt := map[group]int{}, map[group]int{}
	for _, j := range jobs {
		g := group{j.Kind, j.State}
		count[g]++
		attempt[g] = max(attempt[g], j.Attempt)
	}
	groups := slices.SortedFunc(maps.Keys(count), func(a, b group) int {
		return cmp.Or(cmp.Compare(a.kind, b.kind), cmp.Compare(a.state, b.state))
	})
	var parts []string
	for _, g := range groups {
		parts = append(parts, fmt.Sprintf("%s %s=%d (max attempt %d)", g.kind, g.state, count[g], attempt[g]))
	}
	return strings.Join(parts, ", ")
}

// requireNoPanic: no process of the run panicked or died of a fatal
// runtime error.
func (s *soak) requireNoPanic() {
	for _, p := range s.procs {
		log := p.rawLog()
		for _, bad := range []string{"panic:", "fatal error:", "goroutine 1 ["} {
			assert.NotContains(s.t, log, bad, "%s's log", p.name)
		}
	}
}

// requireMemory: serve-b, never killed, ends within 20 % of its resident
// set after the first sync.
func (s *soak) requireMemory() {
	p := s.replicas[1]
	now, err := residentSet(p.pid())
	require.NoError(s.t, err)
	s.t.Logf("soak: %s resident set %d MiB after the first sync, %d MiB at the end", p.name, s.rssAfterFirstSync>>20, now>>20)
	assert.LessOrEqual(s.t, float64(now), 1.2*float64(s.rssAfterFirstSync), "%s's resident set at the end", p.name)
}

// requireEmbedded: every served message with passages has its vectors once
// the provider is healthy again.
func (s *soak) requireEmbedded(ctx context.Context) {
	poll.Soft(s.t, time.Second, time.Minute, "every served message with passages has its vectors", func() (bool, string) {
		n := s.b.awaitingVectors(s.t, "test-model")
		return n == 0, fmt.Sprintf("%d served messages with passages and no vectors", n)
	})
}

// requireProbeFound: the probe message delivered near the end is found by
// its phrase lexically and by meaning.
func (s *soak) requireProbeFound() {
	require.True(s.t, s.probeSent.Load(), "the probe message was delivered")
	for _, mode := range []string{"lexical", "semantic"} {
		cmd := exec.Command(s.bin, "search", "-mode", mode, s.probe)
		cmd.Env = fromEnv(s.b.env)
		out, err := cmd.CombinedOutput()
		require.NoError(s.t, err, "%s", out)
		assert.Contains(s.t, string(out), probeSubject, "%s search for the probe", mode)
	}
	addr, ok := addrOf(s.replicas[0])
	require.True(s.t, ok)
	// A replica whose calls to the provider failed during an outage keeps
	// its circuit open for the break (30 s), and its own embedding of the
	// query is refused meanwhile (503); the provider is healthy again for
	// it once that has passed and a trial call succeeded.
	start := time.Now()
	var code int
	var body string
	poll.Every(s.t, time.Second, 2*time.Minute, "serve's API finds the probe by meaning", func() bool {
		code, body = searchAPI(s.t, addr, s.uiUser, s.uiPass, url.Values{"q": {s.probe}, "mode": {"semantic"}})
		return code == 200
	}, func() string { return fmt.Sprintf("%d %s", code, body) })
	s.t.Logf("soak: serve's API searched by meaning after %v", time.Since(start).Round(time.Second))
	assert.Contains(s.t, body, probeSubject)
}

// residentSet returns a process's current resident set (VmRSS) in bytes.
func residentSet(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			var kb int64
			if _, err := fmt.Sscanf(strings.TrimSpace(rest), "%d kB", &kb); err != nil {
				return 0, err
			}
			return kb << 10, nil
		}
	}
	return 0, fmt.Errorf("no VmRSS for process %d", pid)
}

// keepLogs copies every process's log into MAILFATHOM_SOAK_LOG_DIR, when
// it is set, so a run's logs outlive its temporary directory.
func (s *soak) keepLogs() {
	dir := os.Getenv("MAILFATHOM_SOAK_LOG_DIR")
	if dir == "" {
		return
	}
	require.NoError(s.t, os.MkdirAll(dir, 0o755))
	for _, p := range s.procs {
		require.NoError(s.t, os.WriteFile(filepath.Join(dir, p.name+".log"), []byte(p.rawLog()), 0o644))
	}
	s.eventMu.Lock()
	events := strings.Join(s.events, "\n")
	s.eventMu.Unlock()
	require.NoError(s.t, os.WriteFile(filepath.Join(dir, "events.log"), []byte(events), 0o644))
	require.NoError(s.t, os.WriteFile(filepath.Join(dir, "dovecot.log"), []byte(s.b.server.Log()), 0o644))
	s.t.Logf("soak: logs kept in %s", dir)
}

// explain describes, for each difference naming a UID, the stored rows of
// that UID, the changes recorded against them and the folder's checkpoint.
func (s *soak) explain(ctx context.Context, diffs []string) string {
	var b strings.Builder
	changes, err := mailstore.ListMutations(ctx, s.b.pool, mailstore.MutationFilter{Limit: math.MaxInt32})
	if err != nil {
		fmt.Fprintf(&b, "the changes: %v\n", err)
	}
	changesOf := map[uuid.UUID][]string{}
	for _, m := range slices.Backward(changes) { // oldest first
		placed, left := "-", "-"
		if m.PlacedUID != 0 {
			placed = strconv.FormatUint(uint64(m.PlacedUID), 10)
		}
		if !m.SourceLeftAt.IsZero() {
			left = m.SourceLeftAt.String()
		}
		changesOf[m.EmailID] = append(changesOf[m.EmailID],
			fmt.Sprintf("%s %s %s %s placed %s left %s", m.Kind, m.State, m.Stage, m.FailureCode, placed, left))
	}
	orDash := func(at *time.Time) string {
		if at == nil {
			return "-"
		}
		return at.String()
	}
	for _, d := range diffs {
		var account, alias string
		var uid uint32
		head, rest, ok := strings.Cut(d, ": UID ")
		if !ok {
			continue
		}
		account, alias, _ = strings.Cut(head, "/")
		fmt.Sscanf(rest, "%d", &uid)
		fmt.Fprintf(&b, "%s\n", d)
		stored, err := dbassert.ReadOccurrences(ctx, s.b.pool, strings.ToUpper(alias))
		if err != nil {
			fmt.Fprintf(&b, "  %v\n", err)
			continue
		}
		for _, o := range stored {
			if o.Account != account || o.UID != uid {
				continue
			}
			modseq, cycle, lastSeen := "-", "-", "-"
			cp, found, err := mailstore.ReadCheckpoint(ctx, s.b.pool, o.FolderID)
			switch {
			case err != nil:
				fmt.Fprintf(&b, "  %v\n", err)
			case found:
				lastSeen = strconv.FormatUint(uint64(cp.LastSeenUID), 10)
				if cp.HighestModSeq != nil {
					modseq = strconv.FormatUint(*cp.HighestModSeq, 10)
				}
				if cp.Cycle != nil {
					cycle = strconv.FormatUint(cp.Cycle.ModSeq, 10)
				}
			}
			fmt.Fprintf(&b, "  row %s generation %d UIDVALIDITY %d flags %v observed %s expunge observed %s message %s; mutations: %s; checkpoint highest_modseq %s cycle %s last_seen %s\n",
				o.ID, o.Generation, o.UIDValidity, o.Flags, orDash(o.FlagsObservedAt), orDash(o.ExpungeObservedAt), o.MessageID,
				strings.Join(changesOf[o.ID], "; "), modseq, cycle, lastSeen)
			s.eventMu.Lock()
			for _, e := range s.events {
				if o.MessageID != "" && strings.Contains(e, o.MessageID) {
					fmt.Fprintf(&b, "    %s\n", e)
				}
			}
			s.eventMu.Unlock()
		}
	}
	return b.String()
}
