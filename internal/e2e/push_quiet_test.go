package e2e

import (
	"maps"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// quietWindow is how long TestPushQuietWindow watches a quiet account: 45 s
// by default, MAILFATHOM_E2E_PUSH_QUIET_WINDOW (a Go duration) otherwise.
func quietWindow(t testing.TB) time.Duration {
	return envDuration(t, "MAILFATHOM_E2E_PUSH_QUIET_WINDOW", 45*time.Second)
}

// envDuration reads the Go duration in the environment variable name, def
// when it is unset, and fails the test when it does not parse.
func envDuration(t testing.TB, name string, def time.Duration) time.Duration {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	d, err := time.ParseDuration(v)
	require.NoError(t, err, name)
	return d
}

// TestPushQuietWindow: an account in push mode on a server that offers IDLE
// but no NOTIFY, with a 30-minute interval and a 10-second degradation
// period, watches its two folders one session each. Once its first sync is
// done and nothing is delivered, the watch adds no schedule of its own:
// over the quiet window at most one folder pass and one reconciliation
// window are queued per folder, and Dovecot sees no login beyond one
// capability check per degradation period. A delivery afterwards is still
// stored within 5 s. The counts are logged for the record.
func TestPushQuietWindow(t *testing.T) {
	t.Parallel()
	const period = 10 * time.Second
	b, u := setupPush(t, dovecot.WithoutMailboxListIndex())
	b.env["MAILFATHOM_SYNC_INTERVAL"] = "30m"
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "30m"
	b.env["MAILFATHOM_SYNC_PUSH_DEGRADATION_PERIOD"] = period.String()
	for i := range 10 {
		u.Append("INBOX", mailgen.Message(7, i, 2000), time.Time{})
		u.Append("Archive", mailgen.Message(8, i, 2000), time.Time{})
	}
	p := b.start(t, "serve")
	poll.Until(t, time.Minute, "the first sync finishes with both folders watched", func() (bool, string) {
		done := len(b.stored(t, "pushed", "inbox")) >= 10 && len(b.stored(t, "pushed", "archive")) >= 10 &&
			p.count("folder is now synchronized in push mode") >= 2 && b.unfinishedUnits(t) == 0
		return done, "\n" + b.describeJobs(t) + "\n" + tailLines(p.rawLog(), 30)
	})

	window := quietWindow(t)
	logins := func() int { return strings.Count(b.server.Log(), loginLine+u.Name()+">") }
	var lastJob int64
	if jobs := dbassert.Jobs(t, b.pool, ""); len(jobs) > 0 {
		lastJob = jobs[len(jobs)-1].ID
	}
	before := logins()
	time.Sleep(window) // the quiet window watched: what it queues and the logins it makes are its figures
	during := logins() - before

	units := map[string]int{}
	for _, kind := range []string{"folder_pass", "reconcile_window"} {
		for _, j := range dbassert.Jobs(t, b.pool, kind) {
			if j.ID > lastJob {
				alias, _ := j.Arg("alias").(string)
				units[kind+" "+strings.ToLower(alias)]++
			}
		}
	}
	var summary []string
	for _, unit := range slices.Sorted(maps.Keys(units)) {
		summary = append(summary, unit+"="+strconv.Itoa(units[unit]))
	}
	t.Logf("quiet window of %v (degradation period %v): %d IMAP logins, units queued: %s",
		window, period, during, strings.Join(summary, ", "))

	for _, alias := range []string{"inbox", "archive"} {
		require.LessOrEqual(t, units["folder_pass "+alias], 1, "folder passes of %s in the quiet window", alias)
		require.LessOrEqual(t, units["reconcile_window "+alias], 1, "reconciliation windows of %s in the quiet window", alias)
	}
	require.LessOrEqual(t, during, int(window/period)+2, "IMAP logins in the quiet window")

	start := time.Now()
	u.Append("Archive", mailgen.Message(9, 1, 2000), time.Time{})
	poll.Until(t, 5*time.Second, "a delivery after the quiet window is stored", func() (bool, string) {
		return len(b.stored(t, "pushed", "archive")) >= 11, "\n" + tailLines(p.rawLog(), 30)
	})
	t.Logf("a delivery after the quiet window was stored %v after it was made", time.Since(start))
	p.stop(t)
}

// unfinishedUnits counts the folder passes and reconciliation windows not
// yet finished.
func (b *testBundle) unfinishedUnits(t testing.TB) int {
	t.Helper()
	n := 0
	for _, kind := range []string{"folder_pass", "reconcile_window"} {
		for _, j := range dbassert.Jobs(t, b.pool, kind) {
			if j.FinalizedAt == nil {
				n++
			}
		}
	}
	return n
}

// TestPushWatchesWhatTheLatestRunResolved: an account in push mode with
// two folders; the first is deleted on the server and serve restarted.
// `mailfathom status` then shows the other folder still in Push mode and
// the alias that resolves to nothing in Polling, saying why it is not
// watched.
func TestPushWatchesWhatTheLatestRunResolved(t *testing.T) {
	t.Parallel()
	b, u := setupPush(t)
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "lists"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Lists"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "INBOX"
	u.CreateFolder("Lists")
	p := b.start(t, "serve")
	p.waitLog(t, subscribed, pushStoredBound)
	p.stop(t)

	u.DeleteFolder("Lists")
	p = b.start(t, "serve-again")
	status := func() string {
		cmd := exec.Command(binary(t), "status")
		cmd.Env = fromEnv(b.env)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
		return string(out)
	}
	var out string
	// The restart comes within a minute of the last run, so the start
	// schedules the account's run to wait out that minute before it lists
	// the folders again; each look makes it due now instead, as an
	// operator's retry in River UI would. Asked once a second: each look
	// runs the status command.
	poll.Every(t, time.Second, 90*time.Second, "status shows INBOX pushed and LISTS unresolved", func() bool {
		dbassert.MakeJobsDue(t, b.pool, "account_run", rivertype.JobStateScheduled)
		out = status()
		return strings.Contains(out, "pushed/INBOX") && lineOf(out, "pushed/INBOX", "Push") && lineOf(out, "pushed/LISTS", "unresolved: FolderAliasUnresolved")
	}, func() string { return "\n" + out + "\n" + tailLines(p.rawLog(), 30) })
	t.Logf("mailfathom status:\n%s", out)
	// And push still works for the folder that resolves.
	b.deliverAndWait(t, u, "INBOX", "inbox", 1, 1)
	p.stop(t)
}

// lineOf reports whether a line of out starting with prefix contains want.
func lineOf(out, prefix, want string) bool {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, prefix) && strings.Contains(l, want) {
			return true
		}
	}
	return false
}
