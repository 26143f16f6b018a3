package workers_test

import (
	"context"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/imapscript"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
	"github.com/mailfathom/mailfathom/workers"
)

// testClock is the workers' clock in a test: the real time moved on by
// what the test advanced it, so River's own schedule, which reads the
// real time, stays in step with everything but the days the test skips.
type testClock struct {
	mu     sync.Mutex
	offset time.Duration
}

func (c *testClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return time.Now().Add(c.offset)
}

func (c *testClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.offset += d
	c.mu.Unlock()
}

// useClock makes the bundle's workers read c.
func (b *syncBundle) useClock(c *testClock) {
	b.editDeps = func(d *workers.Dependencies) { d.Now = c.Now }
}

// accountState reads the account's run state.
func (b *syncBundle) accountState(t *testing.T, account string) mailstore.AccountState {
	t.Helper()
	st, _, err := mailstore.ReadAccountState(context.Background(), b.pool, config.AccountKey(account))
	require.NoError(t, err)
	return st
}

// report reads the status of the bundle's accounts as the workers' clock
// sees them.
func (b *syncBundle) report(t *testing.T) status.Report {
	t.Helper()
	rep, err := status.Read(context.Background(), b.pool, workers.StatusOptions(b.deps(t)))
	require.NoError(t, err)
	return rep
}

// scheduledIn is how far from now the newest job of kind is scheduled,
// and its state.
func (b *syncBundle) scheduledIn(t *testing.T, kind string) (time.Duration, string) {
	t.Helper()
	j := dbassert.LastJob(t, b.pool, kind)
	return time.Until(j.ScheduledAt), string(j.State)
}

// useScripted points account 0 at the scripted server srv, in plain text.
func (b *syncBundle) useScripted(srv *imapscript.Server) {
	b.env["MAILFATHOM_ACCOUNTS_0_HOST"] = srv.Host()
	b.env["MAILFATHOM_ACCOUNTS_0_PORT"] = srv.PortText()
	b.env["MAILFATHOM_ACCOUNTS_0_CONNECTION_SECURITY"] = "None"
	b.env["MAILFATHOM_ACCOUNTS_0_ALLOW_INSECURE_CONNECTION"] = "true"
	b.env["MAILFATHOM_ACCOUNTS_0_ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION"] = "true"
	b.env["MAILFATHOM_ACCOUNTS_0_PERMITTED_AUTHENTICATION_MECHANISMS"] = "PLAIN"
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST")
	delete(b.env, "MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY")
}

// TestThrottledAccountWaitsWithoutFailing: a server that throttles the
// account — at login, or by ending a folder pass's session with a BYE —
// leaves the account snoozed until the server's suggested time (or the
// run backoff), shown as throttled, counted, and with no failed run: the
// account's work asks the server nothing until then, and asks again
// afterwards.
//
// Dovecot cannot be made to throttle, so a scripted server plays the
// throttling parts; the folder pass's account run lists the folders of a
// real Dovecot.
func TestThrottledAccountWaitsWithoutFailing(t *testing.T) {
	t.Parallel()

	t.Run("AtLogin", func(t *testing.T) {
		t.Parallel()
		srv := imapscript.Start(t, func(c *imapscript.Conn) {
			c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN")
			tag, _, _, ok := c.Authenticate()
			if !ok {
				return
			}
			c.Send(tag + " NO Request is throttled. Suggested Backoff Time: 120000 milliseconds")
			c.Serve()
		})
		b := setupSync(t)
		b.useScripted(srv)
		clock := &testClock{}
		b.useClock(clock)
		b.start(t)
		b.waitIdle(t)

		require.Equal(t, 1, srv.Connections(), "one login, not a retry loop; jobs:\n%s", b.jobHistory(t))
		runs := b.jobs(t, "account_run")
		require.Len(t, runs, 1, "jobs:\n%s", b.jobHistory(t))
		in, state := b.scheduledIn(t, "account_run")
		require.Equal(t, "scheduled", state, "the run waits as a snoozed job, neither failed nor cancelled")
		require.InDelta(t, (2 * time.Minute).Seconds(), in.Seconds(), 20, "the server's suggested time, jittered")
		st := b.accountState(t, "primary")
		require.Zero(t, st.ConsecutiveFailures)
		require.False(t, st.RunFailed)
		require.Empty(t, st.LastFailureIdentity)

		rep := b.report(t)
		acct := rep.Accounts[0]
		require.NotNil(t, acct.Throttled, "shown as throttled")
		require.Equal(t, string(imapx.ThrottleRequestThrottled), acct.Throttled.Reason)
		require.Equal(t, 120.0, *acct.Throttled.SuggestedDelaySeconds)
		require.Zero(t, acct.ConsecutiveFailures)
		require.Equal(t, status.WhyThrottle, acct.NextRun.Why)
		require.Equal(t, map[string]int64{"RequestThrottled": 1}, acct.Throttles)
		require.Contains(t, b.logs.String(), "the mail server throttles the account")
		require.NotContains(t, b.logs.String(), "Suggested Backoff", "server text stays out of the log")
		require.NotContains(t, b.jobText(t), "Suggested Backoff")

		// Made due while the throttle holds, the run asks nothing.
		b.runAgain(t)
		require.Equal(t, 1, srv.Connections(), "a throttled account asks nothing before its time")
		require.Contains(t, b.logs.String(), "the account's server throttles it; the work waits until then")

		// Once it has passed, the run logs in again; the server throttles
		// again, and still nothing has failed.
		clock.Advance(3 * time.Minute)
		b.runAgain(t)
		require.Equal(t, 2, srv.Connections())
		st = b.accountState(t, "primary")
		require.Zero(t, st.ConsecutiveFailures)
		require.False(t, st.RunFailed)
		rep = b.report(t)
		require.Equal(t, map[string]int64{"RequestThrottled": 2}, rep.Accounts[0].Throttles)
		require.Equal(t, 2, rep.Accounts[0].Throttled.InARow)
	})

	t.Run("ByeDuringAFolderPass", func(t *testing.T) {
		t.Parallel()
		srv := imapscript.Start(t, func(c *imapscript.Conn) {
			c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN")
			tag, _, _, ok := c.Authenticate()
			if !ok {
				return
			}
			c.Send(tag + " OK [CAPABILITY IMAP4rev1] logged in")
			for {
				line, ok := c.ReadLine()
				if !ok {
					return
				}
				f := strings.Fields(line)
				if len(f) < 2 {
					continue
				}
				switch strings.ToUpper(f[1]) {
				case "LIST":
					c.Send(`* LIST () "/" INBOX`, f[0]+" OK done")
				case "EXAMINE":
					c.Send("* 3 EXISTS", "* OK [UIDVALIDITY 7] ok", "* OK [UIDNEXT 4] ok", f[0]+" OK [READ-ONLY] done")
				case "UID":
					if strings.EqualFold(f[2], "SEARCH") {
						c.Send("* SEARCH 1 2 3", f[0]+" OK done")
						continue
					}
					c.Send("* BYE [ALERT] Account exceeded command or bandwidth limits")
					return
				case "LOGOUT":
					c.Send("* BYE bye", f[0]+" OK done")
					return
				default:
					c.Send(f[0] + " BAD not scripted")
				}
			}
		})
		b := setupSync(t)
		var opened atomic.Int32
		b.openRead = func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
			// The run lists the folders and goes on to the pass over the
			// same session, which reaches the throttling server.
			opened.Add(1)
			ep.Host, ep.Port, ep.Security = srv.Host(), srv.Port(), imapx.None
			ep.AllowInsecureConnection, ep.AllowClearTextOverUnencrypted = true, true
			return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
		}
		b.start(t)
		b.waitIdle(t)

		require.Equal(t, 1, srv.Connections(), "the pass was not repeated at once; jobs:\n%s", b.jobHistory(t))
		in, state := b.scheduledIn(t, "folder_pass")
		require.Equal(t, "scheduled", state, "the pass waits, snoozed, to continue from its checkpoint")
		// No suggested time: the run backoff for one throttle, which with
		// a one-hour interval is the interval.
		require.InDelta(t, time.Hour.Seconds(), in.Seconds(), 60)
		st := b.accountState(t, "primary")
		require.Zero(t, st.ConsecutiveFailures)
		require.False(t, st.RunFailed, "the throttled pass did not fail the account's run")
		rep := b.report(t)
		acct := rep.Accounts[0]
		require.NotNil(t, acct.Throttled)
		require.Equal(t, string(imapx.ThrottleBandwidthExceeded), acct.Throttled.Reason)
		require.Nil(t, acct.Throttled.SuggestedDelaySeconds)
		require.Nil(t, acct.Folders[0].LastFailure, "no folder failure is recorded")

		// The account's next run waits too, without listing the folders.
		b.runAgain(t)
		require.EqualValues(t, 1, opened.Load(), "nothing more was opened while throttled")
		require.Equal(t, 1, srv.Connections())
	})
}

// TestThrottledReconciliationWindowWaits: a server that throttles the
// reconciliation window's EXAMINE leaves the window snoozed and the
// account throttled, with no failed folder or run, while the pass before
// it went through. The run, the pass and the window it carries share one
// session, to a scripted server (Dovecot cannot be made to throttle) that
// answers the pass's EXAMINE of an empty folder and throttles the next.
func TestThrottledReconciliationWindowWaits(t *testing.T) {
	t.Parallel()
	var examined atomic.Int32
	srv := imapscript.Start(t, func(c *imapscript.Conn) {
		c.Greet("IMAP4rev1 SASL-IR AUTH=PLAIN")
		tag, _, _, ok := c.Authenticate()
		if !ok {
			return
		}
		c.Send(tag + " OK [CAPABILITY IMAP4rev1] logged in")
		c.ServeWith("IMAP4rev1", map[string]func(string){
			"LIST": func(tag string) { c.Send(`* LIST () "/" INBOX`, tag+" OK done") },
			"EXAMINE": func(tag string) {
				if examined.Add(1) > 1 {
					c.Send(tag + " NO [THROTTLED] Too many requests, slow down")
					return
				}
				c.Send("* 0 EXISTS", "* OK [UIDVALIDITY 7] ok", "* OK [UIDNEXT 1] ok", tag+" OK [READ-ONLY] done")
			},
			"UID": func(tag string) { c.Send("* SEARCH", tag+" OK done") },
		})
	})
	b := setupSync(t)
	b.useScripted(srv)
	b.start(t)
	b.waitIdle(t)

	require.Equal(t, 1, srv.Connections(), "one session, the window asked once; jobs:\n%s", b.jobHistory(t))
	require.EqualValues(t, 2, examined.Load(), "the pass's EXAMINE and the window's")
	require.Len(t, b.jobs(t, "folder_pass"), 1)
	in, state := b.scheduledIn(t, "reconcile_window")
	require.Equal(t, "scheduled", state, "the window waits, snoozed")
	require.InDelta(t, time.Hour.Seconds(), in.Seconds(), 60)
	st := b.accountState(t, "primary")
	require.Zero(t, st.ConsecutiveFailures)
	require.False(t, st.RunFailed)
	acct := b.report(t).Accounts[0]
	require.NotNil(t, acct.Throttled)
	require.Equal(t, string(imapx.ThrottleThrottled), acct.Throttled.Reason)
	require.Nil(t, acct.Folders[0].LastFailure)
	require.NotContains(t, b.logs.String(), "slow down")
}

// TestDownloadBudgetSpreadsAFirstSynchronizationOverDays: an account whose
// daily download budget is smaller than its mailbox stores, on its first
// day, the messages the budget holds, in UID order, with the checkpoint
// committed below the first it left; status shows how far it got and when
// it continues; the next day — by the workers' clock — the folder
// continues from there, and no message body is fetched twice.
func TestDownloadBudgetSpreadsAFirstSynchronizationOverDays(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t)
	b := setupSyncOn(t, srv)
	const (
		n      = 20
		size   = 5_000
		budget = 60_000
	)
	raws := make([]dovecot.SeedMessage, n)
	for i := range raws {
		raws[i] = dovecot.SeedMessage{Raw: mailgen.Message(41, i, size), InternalDate: time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Minute)}
	}
	b.user.SeedMaildir("INBOX", raws)
	b.env["MAILFATHOM_SYNC_MAX_RAW_MIME_BYTES"] = "20000"
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "5"
	b.env["MAILFATHOM_ACCOUNTS_0_MAX_DOWNLOAD_BYTES_PER_DAY"] = strconv.Itoa(budget)
	// The read sessions are recorded on the wire, without TLS, so the
	// bodies they ask for can be counted.
	var reads wiretap.Recorder
	b.openRead = func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
		ep.Security, ep.Port = imapx.None, srv.Port()
		ep.AllowInsecureConnection, ep.AllowClearTextOverUnencrypted = true, true
		ep.Dial = reads.Dial(srv.Addr())
		return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
	}
	clock := &testClock{}
	b.useClock(clock)
	b.start(t)
	b.waitIdle(t)

	// What one day's budget holds, by the sizes the server declares.
	var sizes []int64
	for _, m := range raws {
		sizes = append(sizes, int64(len(m.Raw)))
	}
	firstDay, spent := 0, int64(0)
	for firstDay < n && spent+sizes[firstDay] <= budget {
		spent += sizes[firstDay]
		firstDay++
	}
	require.Less(t, firstDay, n, "the budget is smaller than the mailbox")

	rows := b.stored(t, "INBOX")
	require.Len(t, rows, firstDay, "the first day stops at the budget; jobs:\n%s", b.jobHistory(t))
	for i, r := range rows {
		require.EqualValues(t, i+1, r.uid, "in UID order")
	}
	rep := b.report(t)
	acct := rep.Accounts[0]
	require.Zero(t, acct.ConsecutiveFailures, "a budget reached is no failure")
	require.NotNil(t, acct.DownloadBudget)
	require.Equal(t, spent, acct.DownloadBudget.UsedBytes)
	require.NotNil(t, acct.DownloadBudget.ContinuesAt, "status says when it continues")
	require.WithinDuration(t, clock.Now().Add(25*time.Hour), *acct.DownloadBudget.ContinuesAt, time.Hour+time.Minute)
	folder := acct.Folders[0]
	require.EqualValues(t, firstDay, folder.Checkpoint.LastSeenUID, "the checkpoint is committed below the first message left")
	require.EqualValues(t, n+1, folder.Checkpoint.ExaminedUIDNext, "and status says how far that is")
	in, state := b.scheduledIn(t, "folder_pass")
	require.Equal(t, "scheduled", state)
	require.Greater(t, in, 23*time.Hour, "the pass waits for the window")
	require.Equal(t, firstDay, len(fetchedBodies(t, &reads)), "nothing beyond the budget was fetched, read-ahead included")

	// The next day.
	clock.Advance(acct.DownloadBudget.ContinuesAt.Sub(clock.Now()) + time.Minute)
	b.makeDue(t, "folder_pass")
	b.waitIdle(t)

	rows = b.stored(t, "INBOX")
	require.Len(t, rows, n, "jobs:\n%s", b.jobHistory(t))
	fetched := fetchedBodies(t, &reads)
	require.Len(t, fetched, n)
	for uid, times := range fetched {
		require.Equal(t, 1, times, "UID %d fetched once", uid)
	}
	rep = b.report(t)
	require.Nil(t, rep.Accounts[0].DownloadBudget.ContinuesAt, "nothing waits for the budget now")
	require.EqualValues(t, n, rep.Accounts[0].Folders[0].Checkpoint.LastSeenUID)
	assertUnseen(t, b.user, "INBOX")
}

// fetchedBodies counts, per UID, the bodies the recorded sessions asked
// for (UID FETCH set (... BODY.PEEK[])).
func fetchedBodies(t *testing.T, reads *wiretap.Recorder) map[uint32]int {
	t.Helper()
	out := map[uint32]int{}
	for _, line := range reads.Lines() {
		f := strings.Fields(line)
		if !strings.Contains(line, "BODY.PEEK[") || len(f) < 4 || !strings.EqualFold(f[1], "UID") {
			continue
		}
		for _, r := range strings.Split(f[3], ",") {
			lo, hi, isRange := strings.Cut(r, ":")
			a, err := strconv.ParseUint(lo, 10, 32)
			require.NoError(t, err, line)
			z := a
			if isRange {
				z, err = strconv.ParseUint(hi, 10, 32)
				require.NoError(t, err, line)
			}
			for u := a; u <= z; u++ {
				out[uint32(u)]++
			}
		}
	}
	return out
}
