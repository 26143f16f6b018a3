package workers_test

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/status"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/nocopyuid"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
	"github.com/mailfathom/mailfathom/jobs"
	"github.com/mailfathom/mailfathom/workers"
)

// The capability lists of the servers without MOVE, and without MOVE and
// UIDPLUS. Dovecot still carries out MOVE and UID EXPUNGE when they are
// not listed: these show that MailFathom honours what is advertised.
const (
	capsWithoutMove          = "IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN UIDPLUS"
	capsWithoutMoveOrUIDPlus = "IMAP4rev1 IDLE SPECIAL-USE LIST-EXTENDED LIST-STATUS NAMESPACE AUTH=PLAIN"
)

// mutationBundle is an account with INBOX and ARCHIVE synchronized, five
// messages in INBOX (the fifth already read) and one the owner flagged
// \Deleted in their own client.
type mutationBundle struct {
	*syncBundle
	uids   []imap.UID // the five messages, by UID
	owners imap.UID
}

func setupMutations(t *testing.T, opts ...dovecot.Option) *mutationBundle {
	t.Helper()
	return setupMutationsOn(t, dovecot.Start(t, opts...), nil)
}

// setupMutationsOn is setupMutations on srv, with openWrite opening the
// write connections when it is not nil.
func setupMutationsOn(t *testing.T, srv *dovecot.Server, openWrite func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error)) *mutationBundle {
	t.Helper()
	return setupMutationsWith(t, srv, openWrite, nil)
}

// setupMutationsWith is setupMutationsOn with openRead opening the read
// sessions when it is not nil.
func setupMutationsWith(t *testing.T, srv *dovecot.Server,
	openWrite func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error),
	openRead func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error)) *mutationBundle {
	t.Helper()
	b := &mutationBundle{syncBundle: setupSyncOn(t, srv)}
	b.openWrite, b.openRead = openWrite, openRead
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "archive"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "Filed"
	b.user.CreateFolder("Filed")
	when := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for i := range 5 {
		var flags []imap.Flag
		if i == 4 {
			flags = append(flags, imap.FlagSeen)
		}
		b.uids = append(b.uids, b.user.Append("INBOX", mailgen.Message(14, i, 1200), when, flags...))
	}
	b.owners = b.user.Append("INBOX", mailgen.Message(14, 9, 1200), when, imap.FlagDeleted)
	b.start(t)
	b.waitIdle(t)
	require.Len(t, b.stored(t, "INBOX"), len(b.uids)+1, "the first sync stored INBOX; jobs:\n%s\nlogs:\n%s", b.jobHistory(t), b.logs.String())
	return b
}

// emailID is the stored email of uid in INBOX.
func (b *mutationBundle) emailID(t *testing.T, uid imap.UID) uuid.UUID {
	t.Helper()
	return storedAt(t, b.pool, "INBOX", uid).ID
}

// storedAt is the occurrence stored at uid of alias.
func storedAt(t *testing.T, pool *pgxpool.Pool, alias string, uid imap.UID) dbassert.Occurrence {
	t.Helper()
	for _, o := range dbassert.Occurrences(t, pool, alias) {
		if o.UID == uint32(uid) {
			return o
		}
	}
	require.Failf(t, "not stored", "nothing stored at UID %d of %s", uid, alias)
	return dbassert.Occurrence{}
}

// tombstones counts the stored occurrences whose expunge was observed.
func tombstones(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	n := 0
	for _, o := range dbassert.Occurrences(t, pool, "") {
		if o.Tombstoned {
			n++
		}
	}
	return n
}

func (b *mutationBundle) request(t *testing.T, uid imap.UID, kind, dest string) mailstore.Mutation {
	t.Helper()
	m, created, err := mutation.Record(context.Background(), b.pool, b.deps(t).Config, b.client,
		mutation.Request{EmailID: b.emailID(t, uid), Kind: kind, DestinationAlias: dest})
	require.NoError(t, err)
	require.True(t, created)
	return m
}

func (b *mutationBundle) mutation(t *testing.T, id uuid.UUID) mailstore.Mutation {
	t.Helper()
	m, found, err := mailstore.ReadMutation(context.Background(), b.pool, id)
	require.NoError(t, err)
	require.True(t, found)
	return m
}

func TestMailboxMutations(t *testing.T) {
	t.Parallel()

	for name, opts := range map[string][]dovecot.Option{
		"WithMove":    nil,
		"WithoutMove": {dovecot.WithCapability(capsWithoutMove)},
	} {
		t.Run(name+"/EachKindEndsAsAsked", func(t *testing.T) {
			t.Parallel()
			srv := dovecot.Start(t, opts...)
			// The read sessions are recorded on the wire (without TLS, so
			// their commands can be read) while the write side works.
			var reads wiretap.Recorder
			b := setupMutationsWith(t, srv, nil, func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
				ep.Security, ep.Port = imapx.None, srv.Port()
				ep.AllowInsecureConnection, ep.AllowClearTextOverUnencrypted = true, true
				ep.Dial = reads.Dial(srv.Addr())
				return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
			})
			move := b.request(t, b.uids[0], "move", "archive")
			cp := b.request(t, b.uids[1], "copy", "archive")
			del := b.request(t, b.uids[2], "delete", "")
			read := b.request(t, b.uids[3], "mark-read", "")
			unread := b.request(t, b.uids[4], "mark-unread", "")
			b.waitIdle(t)

			for _, m := range []mailstore.Mutation{move, cp, del, read, unread} {
				got := b.mutation(t, m.ID)
				require.Equal(t, mailstore.MutationCompleted, got.State, "%s: failure code %q", got.Kind, got.FailureCode)
				require.Equal(t, 1, got.Attempts, "%s", got.Kind)
			}
			got := b.mutation(t, move.ID)
			if name == "WithMove" {
				require.Equal(t, mailstore.PathMove, got.Path)
			} else {
				require.Equal(t, mailstore.PathFallback, got.Path)
			}
			require.NotZero(t, got.PlacedUID, "the server's COPYUID is recorded")

			// The mailbox, read over a connection of its own.
			inbox := b.user.UIDs("INBOX")
			require.NotContains(t, inbox, b.uids[0], "moved away")
			require.Contains(t, inbox, b.uids[1], "a copy leaves the source")
			require.NotContains(t, inbox, b.uids[2], "deleted")
			require.Contains(t, inbox, b.owners, "the owner's own \\Deleted message is never expunged by us")
			require.Contains(t, b.user.Flags("INBOX", b.owners), imap.FlagDeleted)
			require.Len(t, b.user.UIDs("Filed"), 2, "the moved message and the copy, each once")
			require.Contains(t, b.user.UIDs("Filed"), imap.UID(got.PlacedUID))
			require.Contains(t, b.user.Flags("INBOX", b.uids[3]), imap.FlagSeen)
			require.NotContains(t, b.user.Flags("INBOX", b.uids[4]), imap.FlagSeen)

			// A completed delete hides the local copy at once.
			e, found, err := mailstore.ReadMutableEmail(context.Background(), b.pool, del.EmailID)
			require.NoError(t, err)
			require.True(t, found)
			require.True(t, e.Tombstoned)

			// The next run recognizes the changes as MailFathom's own: the
			// relocation carried the stored email across (same id, same
			// content row, nothing fetched for it), the copy is stored as a
			// discovery, and nothing else is tombstoned.
			contentBefore := dbassert.OccurrenceByID(t, b.pool, move.EmailID).ContentSHA256
			require.NotNil(t, contentBefore)
			before := len(reads.Lines())
			b.runAgain(t)
			// The only body fetched on the wire is the copy's.
			copyUID := strconv.FormatUint(uint64(b.mutation(t, cp.ID).PlacedUID), 10)
			bodies := 0
			for _, line := range reads.Lines()[before:] {
				if f := strings.Fields(line); strings.Contains(line, "BODY.PEEK[") && len(f) > 3 {
					require.Equal(t, copyUID, f[3], "a body fetched besides the copy's: %q", line)
					bodies++
				}
			}
			require.Equal(t, 1, bodies, "jobs:\n%s", b.jobHistory(t))
			moved, found, err := mailstore.ReadMutableEmail(context.Background(), b.pool, move.EmailID)
			require.NoError(t, err)
			require.True(t, found)
			require.False(t, moved.Tombstoned)
			require.Equal(t, "ARCHIVE", moved.Alias)
			require.Equal(t, got.PlacedUID, moved.UID)
			require.Equal(t, contentBefore, dbassert.OccurrenceByID(t, b.pool, move.EmailID).ContentSHA256)
			archive := b.stored(t, "ARCHIVE")
			require.Len(t, archive, 2, "the carried email and the copy, no third row")
			out := b.lastPassOutput(t, "ARCHIVE")
			require.EqualValues(t, 1, out["carried_by_mailfathom"])
			require.EqualValues(t, 1, out["copied_by_mailfathom"])
			require.EqualValues(t, 1, out["stored"], "only the copy's body was fetched")
			require.Equal(t, 1, tombstones(t, b.pool), "only the email MailFathom deleted")
			require.Len(t, b.stored(t, "INBOX"), 5, "four still in INBOX, the deleted one tombstoned")
			require.Contains(t, b.logs.String(), "discoveries recognized as changes of MailFathom's own and withheld")

			// Nothing on the read side changed the mailbox or selected a
			// folder read-write, whatever the write side did meanwhile.
			names := wiretap.RequireReadOnly(t, &reads)
			require.Contains(t, names, "EXAMINE")
		})
	}

	t.Run("NoSafeWayIsRefusedAtTheFirstAttemptWithNothingIssued", func(t *testing.T) {
		t.Parallel()
		b := setupMutations(t, dovecot.WithCapability(capsWithoutMoveOrUIDPlus))
		move := b.request(t, b.uids[0], "move", "archive")
		del := b.request(t, b.uids[2], "delete", "")
		read := b.request(t, b.uids[3], "mark-read", "")
		b.waitIdle(t)
		for _, m := range []mailstore.Mutation{move, del} {
			got := b.mutation(t, m.ID)
			require.Equal(t, mailstore.MutationDeadLettered, got.State)
			require.Equal(t, mutation.CodeNoSafeWay, got.FailureCode)
			require.Equal(t, 1, got.Attempts)
			require.Equal(t, mailstore.StageRecorded, got.Stage, "nothing was issued")
		}
		require.Equal(t, mailstore.MutationCompleted, b.mutation(t, read.ID).State, "a flag change needs neither")
		require.Subset(t, b.user.UIDs("INBOX"), b.uids)
		require.Empty(t, b.user.UIDs("Filed"))
		require.NotContains(t, b.user.Flags("INBOX", b.uids[0]), imap.FlagDeleted)
		require.NotContains(t, b.user.Flags("INBOX", b.uids[2]), imap.FlagDeleted)
	})

	t.Run("MissingDestinationIsRefusedAtTheFirstAttempt", func(t *testing.T) {
		t.Parallel()
		b := setupMutations(t)
		b.user.DeleteFolder("Filed")
		move := b.request(t, b.uids[0], "move", "archive")
		b.waitIdle(t)
		got := b.mutation(t, move.ID)
		require.Equal(t, mailstore.MutationDeadLettered, got.State)
		require.Equal(t, mutation.CodeDestinationMissing, got.FailureCode)
		require.Equal(t, 1, got.Attempts)
		require.Contains(t, b.user.UIDs("INBOX"), b.uids[0])
	})
}

// answerCutter is the write connection's dial for a test that loses a
// placement's answer: it connects without TLS so it can see the commands,
// counts every UID COPY and UID MOVE written, and when armed closes the
// connection as the server's answer to one begins to arrive — after the
// server carried it out, before the client read a byte of its answer.
// With breakWrite set it instead closes the connection as the next one is
// written, writing none of it: the server never sees that command.
type answerCutter struct {
	mu         sync.Mutex
	armed      bool
	breakWrite bool
	sent       int
}

// arm makes the next placement's answer lost (breakWrite false) or its
// write fail at the first byte (breakWrite true).
func (c *answerCutter) arm(breakWrite bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed, c.breakWrite = !breakWrite, breakWrite
}

func (c *answerCutter) placements() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.sent
}

func (c *answerCutter) open(srv *dovecot.Server) func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error) {
	return func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error) {
		ep.Security, ep.Port = imapx.None, srv.Port()
		ep.AllowInsecureConnection, ep.AllowClearTextOverUnencrypted = true, true
		ep.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
			conn, err := (&net.Dialer{}).DialContext(ctx, network, srv.Addr())
			if err != nil {
				return nil, err
			}
			return &cuttingConn{Conn: conn, c: c}, nil
		}
		return imapx.OpenWriteConnection(ctx, ep, imapx.SessionOptions{})
	}
}

type cuttingConn struct {
	net.Conn
	c       *answerCutter
	pending bool
}

var placementCommand = regexp.MustCompile(`^\S+ UID (COPY|MOVE) `)

func (cc *cuttingConn) Write(p []byte) (int, error) {
	if placementCommand.Match(p) {
		cc.c.mu.Lock()
		cc.c.sent++
		cc.pending = cc.c.armed
		broken := cc.c.breakWrite
		cc.c.armed, cc.c.breakWrite = false, false
		cc.c.mu.Unlock()
		if broken {
			_ = cc.Conn.Close()
			return 0, syscall.EPIPE
		}
	}
	return cc.Conn.Write(p)
}

func (cc *cuttingConn) Read(p []byte) (int, error) {
	n, err := cc.Conn.Read(p)
	if cc.pending && n > 0 {
		_ = cc.Conn.Close()
		return 0, io.ErrUnexpectedEOF
	}
	return n, err
}

func TestPlacementWhoseAnswerIsLost(t *testing.T) {
	t.Parallel()

	for name, opts := range map[string][]dovecot.Option{
		"CopyWithoutMove": {dovecot.WithCapability(capsWithoutMove)},
		"Move":            nil,
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			cutter := &answerCutter{armed: true}
			srv := dovecot.Start(t, opts...)
			b := setupMutationsOn(t, srv, cutter.open(srv))
			sha := dbassert.OccurrenceByID(t, b.pool, b.emailID(t, b.uids[0])).ContentSHA256
			require.NotNil(t, sha)
			move := b.request(t, b.uids[0], "move", "archive")
			b.waitIdle(t)
			got := b.mutation(t, move.ID)
			require.Equal(t, 1, cutter.placements())
			require.Equal(t, mailstore.StagePlacementIssued, got.Stage)
			require.Equal(t, mutation.CodeUnknownOutcome, got.FailureCode)
			require.NotEqual(t, mailstore.MutationCompleted, got.State)

			// The next runs never issue it again.
			b.runAgain(t)
			b.runAgain(t)
			require.Equal(t, 1, cutter.placements(), "a placement whose answer was lost was issued again")
			got = b.mutation(t, move.ID)

			if name == "Move" {
				// MOVE took the source with it: once synchronization has
				// seen it leave, the change is completed. The answer that
				// named the placement was the one lost, so it is unjoined:
				// the destination's copy is stored as a discovery and is
				// the one served, the source a tombstone.
				require.Equal(t, mailstore.MutationCompleted, got.State, "failure code %q", got.FailureCode)
				require.Empty(t, got.FailureCode, "it ran: nothing is stuck")
				require.False(t, got.SourceLeftAt.IsZero())
				require.Equal(t, "completed, unjoined", mutation.ViewOf(got).Summary)
				require.NotContains(t, b.user.UIDs("INBOX"), b.uids[0])
				require.Len(t, b.user.UIDs("Filed"), 1)
				require.Equal(t, []string{"ARCHIVE"}, b.servedCopies(t, sha), "one served copy, the destination's")
				return
			}
			// A COPY leaves the source: nothing says whether it landed, so
			// it waits out the grace and is given up on, readably.
			require.Equal(t, mailstore.StagePlacementIssued, got.Stage)
			require.NotEqual(t, mailstore.MutationDeadLettered, got.State)
			dbassert.BackdatePlacement(t, b.pool, move.ID, 7*time.Hour)
			b.runAgain(t)
			got = b.mutation(t, move.ID)
			require.Equal(t, mailstore.MutationDeadLettered, got.State)
			require.Equal(t, mutation.CodeUnknownOutcome, got.FailureCode)
			require.Equal(t, 1, cutter.placements())
			require.LessOrEqual(t, len(b.user.UIDs("Filed")), 1, "copied at most once")
			require.Contains(t, b.user.UIDs("INBOX"), b.uids[0], "the source is never removed after an unknown copy")
		})
	}
}

// TestRelocationResumesAfterEachStage stops the process after every stage
// of a relocation without MOVE (COPY, STORE \Deleted, UID EXPUNGE) and
// starts a new one: each carries on from the stage the record names, on a
// write connection of its own, and the message ends in the destination
// exactly once and gone from the source. The stage jobs are left unworked,
// so each stage is carried by one account run's convergence.
func TestRelocationResumesAfterEachStage(t *testing.T) {
	t.Parallel()
	cutter := &answerCutter{} // never armed: it only counts placements
	srv := dovecot.Start(t, dovecot.WithCapability(capsWithoutMove))
	b := &mutationBundle{}
	b = setupMutationsOn(t, srv, cutter.open(srv))
	b.noMutationWorkers = true
	b.start(t)
	b.waitIdle(t)
	move := b.request(t, b.uids[0], "move", "archive")

	var stages []mailstore.MutationStage
	for range 3 {
		b.runAgain(t)
		got := b.mutation(t, move.ID)
		stages = append(stages, got.Stage)
		// A new process: the old one's write connection ends with it.
		b.start(t)
		b.waitIdle(t)
	}
	require.Equal(t, []mailstore.MutationStage{mailstore.StageCopied, mailstore.StageFlagged, mailstore.StageCompleted}, stages)
	got := b.mutation(t, move.ID)
	require.Equal(t, mailstore.MutationCompleted, got.State)
	require.Equal(t, 1, cutter.placements(), "the copy is never repeated")
	require.NotContains(t, b.user.UIDs("INBOX"), b.uids[0])
	require.Contains(t, b.user.UIDs("INBOX"), b.owners)
	require.Equal(t, []imap.UID{imap.UID(got.PlacedUID)}, b.user.UIDs("Filed"))
}

// TestDeleteWhoseFlagWasClearedIsSetAgain: another client clears the
// \Deleted flag a delete set before its expunge; the expunge leaves the
// message in place, so the delete is not completed and the local copy stays
// served — the change goes back to set the flag again (40002) — and the next
// runs carry it to its end: gone on the server, hidden locally. (In the hour
// soak a delete was completed and its message kept by the server, and
// hidden locally for good.)
func TestDeleteWhoseFlagWasClearedIsSetAgain(t *testing.T) {
	t.Parallel()
	b := setupMutations(t)
	b.noMutationWorkers = true
	b.start(t)
	b.waitIdle(t)
	del := b.request(t, b.uids[2], "delete", "")

	b.runAgain(t)
	require.Equal(t, mailstore.StageFlagged, b.mutation(t, del.ID).Stage)
	require.Contains(t, b.user.Flags("INBOX", b.uids[2]), imap.FlagDeleted)
	b.user.SetFlags("INBOX", b.uids[2], nil, []imap.Flag{imap.FlagDeleted})

	b.runAgain(t)
	got := b.mutation(t, del.ID)
	require.NotEqual(t, mailstore.MutationCompleted, got.State, "the message is still on the server")
	require.Equal(t, mailstore.StageRecorded, got.Stage, "back to setting the flag")
	require.Equal(t, mutation.CodeFlagCleared, got.FailureCode)
	require.Contains(t, b.user.UIDs("INBOX"), b.uids[2])
	e, found, err := mailstore.ReadMutableEmail(context.Background(), b.pool, del.EmailID)
	require.NoError(t, err)
	require.True(t, found)
	require.False(t, e.Tombstoned, "the local copy stays served while the server holds the message")

	b.runAgain(t)
	b.runAgain(t)
	got = b.mutation(t, del.ID)
	require.Equal(t, mailstore.MutationCompleted, got.State, "failure code %q", got.FailureCode)
	require.NotContains(t, b.user.UIDs("INBOX"), b.uids[2])
	require.Contains(t, b.user.UIDs("INBOX"), b.owners, "the owner's own \\Deleted message is never expunged by us")
	e, found, err = mailstore.ReadMutableEmail(context.Background(), b.pool, del.EmailID)
	require.NoError(t, err)
	require.True(t, found)
	require.True(t, e.Tombstoned)
}

// TestFailingChangeSpendsItsAttempts: a change the server keeps refusing
// fails the account's run each time, is counted once per attempt across
// runs, and is dead-lettered once MAX_MUTATION_ATTEMPTS are spent.
func TestFailingChangeSpendsItsAttempts(t *testing.T) {
	t.Parallel()
	srv := dovecot.Start(t)
	b := &mutationBundle{syncBundle: setupSyncOn(t, srv)}
	b.env["MAILFATHOM_SYNC_MAX_MUTATION_ATTEMPTS"] = "2"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "filed"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Filed"
	b.user.CreateFolder("Filed")
	uid := b.user.Append("Filed", mailgen.Message(15, 1, 800), time.Now())
	b.start(t)
	b.waitIdle(t)
	emailID := storedAt(t, b.pool, "FILED", uid).ID
	// The folder goes away on the server: selecting it is refused from now on.
	b.user.DeleteFolder("Filed")
	m, _, err := mutation.Record(context.Background(), b.pool, b.deps(t).Config, b.client,
		mutation.Request{EmailID: emailID, Kind: "mark-read"})
	require.NoError(t, err)
	b.waitIdle(t)
	got := b.mutation(t, m.ID)
	require.Equal(t, 1, got.Attempts)
	require.Equal(t, mutation.CodeCommandRefused, got.FailureCode)
	require.Equal(t, mailstore.MutationConverging, got.State)

	b.runAgain(t)
	got = b.mutation(t, m.ID)
	require.Equal(t, 2, got.Attempts, "counted again by the account's run")
	require.Equal(t, mailstore.MutationConverging, got.State)
	b.runAgain(t)
	got = b.mutation(t, m.ID)
	require.Equal(t, mailstore.MutationDeadLettered, got.State)
	require.Equal(t, mutation.CodeAttemptsExhausted, got.FailureCode)
	require.Equal(t, 2, got.Attempts)
}

// TestFailingChangeBacksOffTheAccount: a move into a folder the server
// refuses to put mail in (its ACL grants the owner lookup and read, not
// insert) fails the account's run at every attempt, and each next run is
// scheduled on the run backoff — the wait a failing folder's pass earns the
// account — rather than the interval: the consecutive failures grow, and
// so does the wait, until the attempts are spent.
func TestFailingChangeBacksOffTheAccount(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	srv := dovecot.Start(t, dovecot.WithExtraConfig(`protocol imap {
  mail_plugins = $mail_plugins acl
}
plugin {
  acl = vfile
}`))
	b := &mutationBundle{syncBundle: setupSyncOn(t, srv)}
	const interval, maxBackoff = time.Hour, 16 * time.Hour
	b.env["MAILFATHOM_SYNC_INTERVAL"] = interval.String()
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = maxBackoff.String()
	b.env["MAILFATHOM_SYNC_MAX_MUTATION_ATTEMPTS"] = "4"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "archive"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "Filed"
	b.user.CreateFolder("Filed")
	require.NoError(t, os.WriteFile(filepath.Join(b.user.Home(), "Maildir", "Filed", "dovecot-acl"), []byte("owner lr\n"), 0o644))
	b.uids = append(b.uids, b.user.Append("INBOX", mailgen.Message(16, 1, 800), time.Now()))
	b.start(t)
	b.waitIdle(t)

	move := b.request(t, b.uids[0], "move", "archive")
	b.waitIdle(t)
	got := b.mutation(t, move.ID)
	require.Equal(t, mutation.CodeCommandRefused, got.FailureCode, "the server refused the move")
	require.Equal(t, 1, got.Attempts)

	for failures := 1; failures <= 3; failures++ {
		b.runAgain(t)
		got = b.mutation(t, move.ID)
		require.Equal(t, failures+1, got.Attempts, "counted again by the account's run; jobs:\n%s", b.jobHistory(t))
		require.Equal(t, mutation.CodeCommandRefused, got.FailureCode)
		require.Equal(t, mailstore.StageRecorded, got.Stage, "a refused placement did not run and may be issued again")

		st, _, err := mailstore.ReadAccountState(ctx, b.pool, "primary")
		require.NoError(t, err)
		require.Equal(t, failures, st.ConsecutiveFailures, "the run settled the failed one before it")
		require.True(t, st.RunFailed, "the change failed this run too")
		rep, err := status.Read(ctx, b.pool, workers.StatusOptions(b.deps(t)))
		require.NoError(t, err)
		acct := rep.Accounts[0]
		require.Equal(t, failures+1, acct.ConsecutiveFailures)
		require.NotNil(t, acct.NextRun)
		require.Equal(t, status.WhyBackoff, acct.NextRun.Why)

		// The next run is where the run backoff puts it after this run's
		// failure, counted from when the run started.
		wait := acct.NextRun.At.Sub(*st.RunStartedAt)
		require.GreaterOrEqual(t, wait, workers.MinRunBackoff(interval, maxBackoff, failures+1), "failures %d", failures)
		require.LessOrEqual(t, wait, min(interval<<(failures+1), maxBackoff), "failures %d", failures)
	}
	b.runAgain(t)
	got = b.mutation(t, move.ID)
	require.Equal(t, mailstore.MutationDeadLettered, got.State)
	require.Equal(t, mutation.CodeAttemptsExhausted, got.FailureCode)
	require.Contains(t, b.user.UIDs("INBOX"), b.uids[0])
	require.Empty(t, b.user.UIDs("Filed"))
}

// openWithoutCopyUID opens the write connection to srv through a filter
// that takes COPYUID out of its answers: Dovecot names the placement even
// when UIDPLUS is not advertised, and a server that names none is what
// this test is about.
func openWithoutCopyUID(srv *dovecot.Server, f *nocopyuid.Filter) func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error) {
	return func(ctx context.Context, ep imapx.Endpoint) (*imapx.WriteConnection, error) {
		ep.Security, ep.Port = imapx.None, srv.Port()
		ep.AllowInsecureConnection, ep.AllowClearTextOverUnencrypted = true, true
		ep.Dial = f.Dial(srv.Addr())
		return imapx.OpenWriteConnection(ctx, ep, imapx.SessionOptions{})
	}
}

// servedCopies returns the alias of every served copy of the content
// stored as sha, in alias order.
func (b *mutationBundle) servedCopies(t *testing.T, sha []byte) []string {
	t.Helper()
	var aliases []string
	for _, o := range dbassert.Occurrences(t, b.pool, "") {
		if o.Served && bytes.Equal(o.ContentSHA256, sha) {
			aliases = append(aliases, o.Alias)
		}
	}
	slices.Sort(aliases)
	return aliases
}

// TestRelocationWithoutPlacement: a server that carries a move without
// naming the placement — MOVE without UIDPLUS, or COPY, STORE \Deleted and
// UID EXPUNGE from a server that omits COPYUID — leaves exactly one served
// copy, the destination's, whichever half synchronization meets first: the
// destination's copy is stored as a discovery (nothing can join it to the
// record without a guess), and the source leaving is the relocation
// completing, so the source is tombstoned as MailFathom's relocation. The
// record reads "completed, unjoined", and the status counts it.
func TestRelocationWithoutPlacement(t *testing.T) {
	t.Parallel()
	for name, tc := range map[string]struct {
		caps             string
		path             mailstore.PlacementPath
		destinationFirst bool
	}{
		"Move/SourceLeavesFirst":           {nocopyuid.Capabilities, mailstore.PathMove, false},
		"Move/DestinationFirst":            {nocopyuid.Capabilities, mailstore.PathMove, true},
		"CopyAndExpunge/DestinationFirst":  {capsWithoutMove, mailstore.PathFallback, true},
		"CopyAndExpunge/SourceLeavesFirst": {capsWithoutMove, mailstore.PathFallback, false},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			ctx := context.Background()
			var filter nocopyuid.Filter
			srv := dovecot.Start(t, dovecot.WithCapability(tc.caps))
			b := setupMutationsOn(t, srv, openWithoutCopyUID(srv, &filter))
			sha := dbassert.OccurrenceByID(t, b.pool, b.emailID(t, b.uids[0])).ContentSHA256
			require.NotNil(t, sha)

			move := b.request(t, b.uids[0], "move", "archive")
			b.waitIdle(t)
			got := b.mutation(t, move.ID)
			require.Equal(t, mailstore.MutationCompleted, got.State, "failure code %q", got.FailureCode)
			require.Equal(t, tc.path, got.Path)
			require.Positive(t, filter.Removed(), "the server's answer named the placement and the filter took it out")
			require.Zero(t, got.PlacedUID, "no placement was named")
			require.NotContains(t, b.user.UIDs("INBOX"), b.uids[0])
			require.Len(t, b.user.UIDs("Filed"), 1)
			require.Equal(t, []string{"INBOX"}, b.servedCopies(t, sha), "nothing observed yet")

			sourceLeaves := func() {
				_, err := b.client.Insert(ctx, jobs.ReconcileWindow{AccountID: "primary", Alias: "INBOX"}, nil)
				require.NoError(t, err)
				b.waitIdle(t)
			}
			destinationFound := func() {
				_, err := b.client.Insert(ctx, jobs.FolderPass{AccountID: "primary", Alias: "ARCHIVE"}, nil)
				require.NoError(t, err)
				b.waitIdle(t)
			}
			if tc.destinationFirst {
				destinationFound()
				require.Equal(t, []string{"ARCHIVE", "INBOX"}, b.servedCopies(t, sha), "the source has not been seen to leave yet")
				out := b.lastPassOutput(t, "ARCHIVE")
				require.EqualValues(t, 1, out["stored"], "stored as a discovery")
				require.EqualValues(t, 0, out["carried_by_mailfathom"], "joined to nothing")
				sourceLeaves()
			} else {
				sourceLeaves()
				require.Empty(t, b.servedCopies(t, sha), "the source has left; the destination is not discovered yet")
				destinationFound()
			}
			require.Equal(t, []string{"ARCHIVE"}, b.servedCopies(t, sha), "one served copy, the destination's")

			require.Equal(t, "RelocatedByMailFathom", dbassert.OccurrenceByID(t, b.pool, move.EmailID).ExpungeReason)
			got = b.mutation(t, move.ID)
			require.True(t, got.Unjoined())
			require.False(t, got.SourceLeftAt.IsZero())
			v := mutation.ViewOf(got)
			require.Equal(t, "completed, unjoined", v.Summary)
			require.Equal(t, mutation.PlacementUnjoined, v.Placement)
			rep, err := status.Read(ctx, b.pool, workers.StatusOptions(b.deps(t)))
			require.NoError(t, err)
			require.EqualValues(t, 1, rep.Accounts[0].Mutations.CompletedUnjoined)
			for _, f := range rep.Accounts[0].Folders {
				if f.Alias == "INBOX" {
					require.EqualValues(t, 1, f.Mutations.CompletedUnjoined, "counted under its source")
				}
			}

			// Later runs change nothing: no second copy, no lost one.
			b.runAgain(t)
			require.Equal(t, []string{"ARCHIVE"}, b.servedCopies(t, sha))
			require.Len(t, b.stored(t, "ARCHIVE"), 1)
		})
	}
}

// TestPlacementOfAMessageAlreadyGone: a move or copy asked of a stored
// message the server no longer holds — the owner's own client deleted it
// after MailFathom last looked — places nothing and ends dead-lettered as
// a change whose source no longer exists, rather than completed: a server
// answers a UID MOVE or COPY of a UID it does not hold with a plain OK, as
// if it had run, and naming no placement.
func TestPlacementOfAMessageAlreadyGone(t *testing.T) {
	t.Parallel()
	for _, kind := range []string{"move", "copy"} {
		t.Run(kind, func(t *testing.T) {
			t.Parallel()
			b := setupMutations(t)
			uid := b.uids[1]
			b.user.Expunge("INBOX", uid)
			m := b.request(t, uid, kind, "archive")
			b.waitIdle(t)
			got := b.mutation(t, m.ID)
			require.Equal(t, mailstore.MutationDeadLettered, got.State, "%+v", got)
			require.Equal(t, mutation.CodeSourceGone, got.FailureCode)
			require.Empty(t, b.user.UIDs("Filed"), "nothing was placed")
		})
	}
}
