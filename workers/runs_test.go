package workers_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/workers"
)

// A folder's failure is the account's failure: the failed pass is not
// retried on a schedule of its own, it fails the account's run, and the
// account's next run moves to where the run backoff puts it; a run whose
// folders all succeed clears it. A healthy folder the server no longer
// opens is the exception: the account's next run comes at once, and its
// listing finds the alias unresolved.
func TestFolderFailureBacksOffTheAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSync(t)
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "4h"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "clients"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Clients"
	b.user.CreateFolder("Clients")
	seed(t, b.user, "Clients", 2, 40)
	b.start(t)
	b.waitIdle(t)
	state := func() mailstore.AccountState {
		st, ok, err := mailstore.ReadAccountState(ctx, b.pool, "primary")
		require.NoError(t, err)
		require.True(t, ok)
		return st
	}
	require.Zero(t, state().ConsecutiveFailures)
	require.False(t, state().RunFailed)
	runs := func() int { return dbassert.JobCount(t, b.pool, "account_run", rivertype.JobStateCompleted) }
	lastPass := func() (state, lastError string) {
		pass := dbassert.LastJob(t, b.pool, "folder_pass")
		return string(pass.State), pass.LastError()
	}

	// The folder goes away after its binding was committed: its pass
	// fails, and is not retried; the account's run comes at once instead
	// of an hour later, and finds the alias resolving to nothing.
	b.user.DeleteFolder("Clients")
	before := runs()
	_, err := b.client.Insert(ctx, jobs.FolderPass{AccountID: "primary", Alias: "CLIENTS"}, nil)
	require.NoError(t, err)
	poll.Until(t, 30*time.Second, "the account's run comes at once", func() (bool, string) {
		n := runs()
		return n > before, fmt.Sprintf("%d account runs completed, %d before the pass", n, before)
	})
	b.waitIdle(t)
	passState, lastError := lastPass()
	require.Equal(t, "cancelled", passState, "the folder waits for the account's next run")
	require.Contains(t, lastError, "[MailboxCommandRefused]")
	resolved, err := mailstore.ReadResolvedFolders(ctx, b.pool, "primary", []string{"CLIENTS"})
	require.NoError(t, err)
	require.Equal(t, "FolderAliasUnresolved", resolved.Unresolved["CLIENTS"])

	// Refused again before it ever succeeded since: that failure backs
	// the account off.
	_, err = b.client.Insert(ctx, jobs.FolderPass{AccountID: "primary", Alias: "CLIENTS"}, nil)
	require.NoError(t, err)
	b.waitIdle(t)
	passState, lastError = lastPass()
	require.Equal(t, "cancelled", passState)
	require.Contains(t, lastError, "[MailboxCommandRefused]")
	require.True(t, state().RunFailed)
	_, folders, err := mailstore.RunStates(ctx, b.pool)
	require.NoError(t, err)
	folderFailure := ""
	for _, f := range folders {
		if f.AccountKey == "primary" && f.Alias == "CLIENTS" {
			folderFailure = f.LastFailureIdentity
		}
	}
	require.Equal(t, "MailboxCommandRefused", folderFailure)

	// The metrics read the same state from the database.
	metrics := gatherRuns(t, b.deps(t))
	require.Equal(t, 2.0, metrics[`mailfathom_account_consecutive_failures{account="primary"}`], "the run the refusal brought forward failed, and so does the one now")
	require.Equal(t, (192 * time.Minute).Seconds(), metrics[`mailfathom_account_backoff_seconds{account="primary"}`])
	require.Equal(t, 2.0, metrics[`mailfathom_folder_messages_total{account="primary",alias="CLIENTS",outcome="stored"}`])
	require.Contains(t, metrics, `mailfathom_folder_last_success_age_seconds{account="primary",alias="CLIENTS"}`)

	// The account's next run moved from the hour-long interval to the
	// backoff of two failed runs: four times the interval (the 4h ceiling),
	// less its jitter.
	started := *state().RunStartedAt
	next, err := jobqueue.PendingRuns(ctx, b.pool, "account_run")
	require.NoError(t, err)
	require.Equal(t, "scheduled", next["primary"].State)
	scheduledAt := next["primary"].ScheduledAt
	require.GreaterOrEqual(t, scheduledAt, started.Add(192*time.Minute))
	require.LessOrEqual(t, scheduledAt, started.Add(240*time.Minute))

	// The next run starts with both failures counted; a run whose folders
	// all succeed clears them.
	b.user.CreateFolder("Clients")
	b.runAgain(t)
	require.Equal(t, 2, state().ConsecutiveFailures)
	require.False(t, state().RunFailed, "the folder synchronized again")
	b.runAgain(t)
	require.Zero(t, state().ConsecutiveFailures)
}

// Every configured account always has its next run: one cancelled or
// deleted in River UI is scheduled again by the maintenance leader.
func TestMissingAccountRunIsRepaired(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSync(t)
	seed(t, b.user, "INBOX", 1, 41)
	b.start(t)
	b.waitIdle(t)
	deps := b.deps(t)

	n, err := workers.RepairAccountRuns(ctx, deps, b.client, deps.Logger)
	require.NoError(t, err)
	require.Zero(t, n, "the account has its next run")

	dbassert.CancelJobs(t, b.pool, "account_run", rivertype.JobStateScheduled)
	n, err = workers.RepairAccountRuns(ctx, deps, b.client, deps.Logger)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	require.Contains(t, b.logs.String(), "the account had no next run (cancelled, deleted or discarded); one is scheduled now")
	b.waitIdle(t)
	pending := dbassert.JobCount(t, b.pool, "account_run",
		rivertype.JobStateScheduled, rivertype.JobStateAvailable, rivertype.JobStateRunning)
	require.Equal(t, 1, pending, "the repaired run ran and scheduled its successor")
}

// gatherRuns collects the run metrics once: each series by its name and
// labels, as the exposition writes them.
func gatherRuns(t *testing.T, deps workers.Dependencies) map[string]float64 {
	t.Helper()
	reg := prometheus.NewPedanticRegistry()
	require.NoError(t, reg.Register(status.NewCollector(deps.Pool, workers.StatusOptions(deps))))
	families, err := reg.Gather()
	require.NoError(t, err)
	out := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, fmt.Sprintf("%s=%q", l.GetName(), l.GetValue()))
			}
			v := m.GetGauge().GetValue() + m.GetCounter().GetValue()
			out[f.GetName()+"{"+strings.Join(labels, ",")+"}"] = v
		}
	}
	return out
}

// Starting a process is an operator asking for work now: every account's
// next run becomes due at once with its failures forgotten — unless it was
// attempted less than a minute ago, when it waits out that minute.
func TestStartMakesEveryAccountDue(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSync(t)
	seed(t, b.user, "INBOX", 1, 42)
	b.start(t)
	b.waitIdle(t)
	deps := b.deps(t)
	nextRun := func() (string, time.Time) {
		next, err := jobqueue.PendingRuns(ctx, b.pool, "account_run")
		require.NoError(t, err)
		run, ok := next["primary"]
		require.True(t, ok, "the account has a run coming")
		return run.State, run.ScheduledAt
	}

	// Backing off after four failed runs, its next run half an hour away.
	dbassert.SetRunFailures(t, b.pool, "primary", 4, true)
	dbassert.BackdateRunStart(t, b.pool, "primary", 10*time.Minute)
	dbassert.DelayAccountRun(t, b.pool, 30*time.Minute, 4)
	b.stop()
	n, err := workers.ScheduleConfiguredAccounts(ctx, deps, b.client)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	state, at := nextRun()
	require.Equal(t, "available", state)
	require.WithinDuration(t, time.Now(), at, 5*time.Second)
	st, _, err := mailstore.ReadAccountState(ctx, b.pool, "primary")
	require.NoError(t, err)
	require.Zero(t, st.ConsecutiveFailures)
	require.False(t, st.RunFailed)

	// Attempted moments ago: it waits out the minute.
	dbassert.BackdateRunStart(t, b.pool, "primary", 10*time.Second)
	n, err = workers.ScheduleConfiguredAccounts(ctx, deps, b.client)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	state, at = nextRun()
	require.Equal(t, "scheduled", state)
	require.WithinDuration(t, time.Now().Add(50*time.Second), at, 5*time.Second)
}

// TestStartSchedulingSurvivesADeadlock: a replica's start-up scheduling
// holds an account's scheduling lock and waits for its state row while
// another transaction holds that row and asks for the same lock — as a
// second replica's run does when both start together. PostgreSQL breaks
// the deadlock by rolling the start's transaction back; the start runs it
// again instead of stopping the process.
func TestStartSchedulingSurvivesADeadlock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	b := setupSync(t)
	seed(t, b.user, "INBOX", 1, 42)
	b.start(t)
	b.waitIdle(t)
	deps := b.deps(t)
	b.stop()

	// PostgreSQL rolls back the transaction of the session that looks for
	// the deadlock first, each looking once, a deadlock timeout after it
	// began to wait. The start's session looks after 5 s, so the other
	// transaction's request, made long before that, closes the cycle
	// first; the other's session would look only after a minute.
	cfg := b.pool.Config().Copy()
	cfg.ConnConfig.RuntimeParams["deadlock_timeout"] = "5s"
	startPool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer startPool.Close()
	deps.Pool = startPool

	other, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = other.Rollback(ctx) }()
	dbassert.PostponeDeadlockCheck(t, other, time.Minute)
	dbassert.SetRunFailures(t, other, "primary", 1, false)

	done := make(chan error, 1)
	go func() {
		_, err := workers.ScheduleConfiguredAccounts(ctx, deps, b.client)
		done <- err
	}()
	// The start holds the scheduling lock and waits for the row...
	poll.UntilTrue(t, 10*time.Second, "the start waits for the account's row", func() bool {
		return dbassert.TransactionLockAwaited(t, b.pool)
	})
	// ...and the other transaction asks for the lock within the start's
	// deadlock timeout, so the start's own check finds the cycle.
	lockErr := jobqueue.LockScheduling(ctx, other, jobqueue.ScheduleAccountRuns, "primary")
	if lockErr == nil {
		require.NoError(t, other.Commit(ctx))
	} else {
		_ = other.Rollback(ctx)
	}
	require.NoError(t, <-done, "the start's scheduling ran again after the deadlock")
	require.NoError(t, lockErr, "PostgreSQL rolled the start back, not the other transaction")
	st, _, err := mailstore.ReadAccountState(ctx, b.pool, "primary")
	require.NoError(t, err)
	require.Zero(t, st.ConsecutiveFailures, "the start cleared the failures after the other transaction")
}
