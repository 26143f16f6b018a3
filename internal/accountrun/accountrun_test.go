package accountrun_test

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/accountrun"
	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/jobqueue"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/slots"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestMain(m *testing.M) {
	defer dovecot.StopShared()
	pgtest.Main(m)
}

// testBundle is a fresh database, a fresh user of the shared Dovecot with
// an Archive folder, the connection a run holds, and the run's log.
type testBundle struct {
	ctx    context.Context
	pool   *pgxpool.Pool
	conn   *pgxpool.Conn
	srv    *dovecot.Server
	user   *dovecot.User
	client *river.Client[pgx.Tx]
	log    *capture.Buffer
	now    time.Time
	// finished records each call of Options.Finish.
	finished []finish
}

type finish struct {
	next           time.Time
	failuresBefore int
}

func setup(t *testing.T) *testBundle {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	t.Cleanup(cancel)
	srv := dovecot.Shared(t)
	b := &testBundle{ctx: ctx, pool: dbtest.Pool(t), srv: srv, user: srv.NewUser(), log: &capture.Buffer{},
		now: time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)}
	b.user.CreateFolder("Archive")
	var err error
	b.client, err = jobqueue.NewInsertClient(b.pool)
	require.NoError(t, err)
	b.conn, err = b.pool.Acquire(ctx)
	require.NoError(t, err)
	t.Cleanup(b.conn.Release)
	return b
}

// options are the Options of a run of account over the bundle's user.
func (b *testBundle) options(t *testing.T, account config.Account) accountrun.Options {
	host, port, err := net.SplitHostPort(b.srv.Addr())
	require.NoError(t, err)
	portNum, err := strconv.Atoi(port)
	require.NoError(t, err)
	password := b.user.Password()
	return accountrun.Options{
		Account:        account,
		Interval:       time.Hour,
		Backoff:        func(failures int) time.Duration { return time.Duration(failures) * time.Minute },
		Bounds:         slots.Bounds{MaxAccounts: 4, MaxFoldersPerAccount: 4},
		CommitAttempts: 2,
		MaxMutations:   10,
		Stages:         noMutations{t},
		Open: func(ctx context.Context) (accountrun.Session, error) {
			s, err := imapx.OpenReadSession(ctx, imapx.Endpoint{
				AccountID: account.ID, Host: host, Port: portNum, Security: imapx.None, Username: b.user.Name(),
				Password:                func(context.Context) ([]byte, error) { return []byte(password), nil },
				AllowInsecureConnection: true, AllowClearTextOverUnencrypted: true,
			}, imapx.SessionOptions{})
			if err != nil {
				return nil, err
			}
			return s, nil
		},
		Inserter: b.client,
		Finish: func(_ context.Context, _ pgx.Tx, next time.Time, failuresBefore int) error {
			b.finished = append(b.finished, finish{next, failuresBefore})
			return nil
		},
		Now: func() time.Time { return b.now },
	}
}

// noMutations is the Stepper of an account with no unfinished mutation:
// the run must not ask it for anything.
type noMutations struct{ t *testing.T }

func (n noMutations) Step(context.Context, uuid.UUID, bool) (mailstore.Mutation, error) {
	n.t.Error("the run stepped a mutation of an account that has none")
	return mailstore.Mutation{}, nil
}

// logLines returns the messages of the run's log with their attributes,
// from the line at from on.
func (b *testBundle) logLines(t *testing.T, from int) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(b.log.String()), "\n")[from:] {
		if line == "" {
			continue
		}
		var m map[string]any
		require.NoError(t, json.Unmarshal([]byte(line), &m))
		out = append(out, m)
	}
	return out
}

func (b *testBundle) logLen() int {
	s := strings.TrimSpace(b.log.String())
	if s == "" {
		return 0
	}
	return len(strings.Split(s, "\n"))
}

func withMsg(lines []map[string]any, msg string) []map[string]any {
	var out []map[string]any
	for _, l := range lines {
		if l["msg"] == msg {
			out = append(out, l)
		}
	}
	return out
}

func (b *testBundle) folderPasses(t *testing.T) int {
	t.Helper()
	return dbassert.JobCount(t, b.pool, "folder_pass")
}

// TestRunBindsWhatResolvesAndSchedulesItsPasses: a run binds the aliases
// that resolve, schedules one folder pass each, skips the one that does
// not, and writes the mapping audit — naming the remote path — only when a
// binding changes.
func TestRunBindsWhatResolvesAndSchedulesItsPasses(t *testing.T) {
	t.Parallel()
	b := setup(t)
	account := config.Account{ID: "primary", Folders: []config.Folder{
		{Alias: "INBOX", RemotePath: "INBOX"},
		{Alias: "ARCHIVE", RemotePath: "Archive"},
		{Alias: "GONE", RemotePath: "Nowhere"},
	}}

	rep, err := accountrun.Run(b.ctx, b.pool, b.conn, b.options(t, account), b.log.Logger())
	require.NoError(t, err)
	require.Equal(t, 3, rep.Aliases)
	require.Equal(t, 1, rep.Unresolved)
	require.Equal(t, 2, rep.FolderPassesScheduled)
	require.Equal(t, b.now.Add(time.Hour), rep.Next)
	require.Zero(t, rep.FailuresBefore)
	require.Equal(t, []finish{{b.now.Add(time.Hour), 0}}, b.finished)
	require.Equal(t, 2, b.folderPasses(t))

	lines := b.logLines(t, 0)
	bound := withMsg(lines, "folder alias bound")
	require.Len(t, bound, 2)
	paths := map[string]any{}
	for _, l := range bound {
		paths[l["alias"].(string)] = l["remote_path"]
	}
	require.Equal(t, map[string]any{"INBOX": "INBOX", "ARCHIVE": "Archive"}, paths)
	unresolved := withMsg(lines, "folder alias did not resolve; that folder is skipped this run")
	require.Len(t, unresolved, 1)
	require.Equal(t, "GONE", unresolved[0]["alias"])
	require.NotContains(t, unresolved[0], "remote_path")

	// The same listing again: nothing changed, so no audit, and the passes
	// still pending are not scheduled twice.
	from := b.logLen()
	rep, err = accountrun.Run(b.ctx, b.pool, b.conn, b.options(t, account), b.log.Logger())
	require.NoError(t, err)
	require.Equal(t, 3, rep.Aliases)
	require.Zero(t, rep.FolderPassesScheduled)
	require.Equal(t, 2, b.folderPasses(t))
	require.Empty(t, withMsg(b.logLines(t, from), "folder alias bound"))

	// An alias pointed at another folder is audited as a warning naming
	// both paths.
	b.user.CreateFolder("Other")
	account.Folders[1].RemotePath = "Other"
	from = b.logLen()
	_, err = accountrun.Run(b.ctx, b.pool, b.conn, b.options(t, account), b.log.Logger())
	require.NoError(t, err)
	repointed := withMsg(b.logLines(t, from), "folder alias repointed to another remote folder; a new generation starts from its first UID")
	require.Len(t, repointed, 1)
	require.Equal(t, "WARN", repointed[0]["level"])
	require.Equal(t, "ARCHIVE", repointed[0]["alias"])
	require.Equal(t, "Other", repointed[0]["remote_path"])
	require.Equal(t, "Archive", repointed[0]["previous_remote_path"])
}

// TestRunMeetsFullSlots: a run that finds the account bound reached
// returns slots.ErrFull before it touches the mailbox, schedules nothing
// and calls neither MailboxDone nor Finish.
func TestRunMeetsFullSlots(t *testing.T) {
	t.Parallel()
	b := setup(t)
	other, err := b.pool.Acquire(b.ctx)
	require.NoError(t, err)
	t.Cleanup(other.Release)
	bounds := slots.Bounds{MaxAccounts: 1, MaxFoldersPerAccount: 1}
	held, err := slots.Acquire(b.ctx, other, "another account", "", bounds)
	require.NoError(t, err)
	t.Cleanup(func() { _ = held.Release(context.Background()) })

	opts := b.options(t, config.Account{ID: "primary", Folders: []config.Folder{{Alias: "INBOX", RemotePath: "INBOX"}}})
	opts.Bounds = bounds
	opts.Open = func(context.Context) (accountrun.Session, error) {
		t.Error("a run without its slots opened the mailbox")
		return nil, context.Canceled
	}
	done := false
	opts.MailboxDone = func() { done = true }
	_, err = accountrun.Run(b.ctx, b.pool, b.conn, opts, b.log.Logger())
	require.ErrorIs(t, err, slots.ErrFull)
	require.False(t, done)
	require.Empty(t, b.finished)
	require.Zero(t, b.folderPasses(t))
}

// TestOptionsNameWhatIsMissing: a run without a required option fails
// naming it, before it touches the database.
func TestOptionsNameWhatIsMissing(t *testing.T) {
	t.Parallel()
	full := func() accountrun.Options {
		return accountrun.Options{
			Account:      config.Account{ID: "primary"},
			Interval:     time.Hour,
			Backoff:      func(int) time.Duration { return time.Minute },
			MaxMutations: 1,
			Stages:       noMutations{t},
			Open:         func(context.Context) (accountrun.Session, error) { return nil, nil },
			Inserter:     &river.Client[pgx.Tx]{},
			Finish:       func(context.Context, pgx.Tx, time.Time, int) error { return nil },
		}
	}
	for name, unset := range map[string]func(*accountrun.Options){
		"Account":      func(o *accountrun.Options) { o.Account = config.Account{} },
		"Interval":     func(o *accountrun.Options) { o.Interval = 0 },
		"Backoff":      func(o *accountrun.Options) { o.Backoff = nil },
		"MaxMutations": func(o *accountrun.Options) { o.MaxMutations = 0 },
		"Stages":       func(o *accountrun.Options) { o.Stages = nil },
		"Open":         func(o *accountrun.Options) { o.Open = nil },
		"Inserter":     func(o *accountrun.Options) { o.Inserter = nil },
		"Finish":       func(o *accountrun.Options) { o.Finish = nil },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			opts := full()
			unset(&opts)
			_, err := accountrun.Run(context.Background(), nil, nil, opts, nil)
			require.ErrorContains(t, err, "Options."+name)
		})
	}
}
