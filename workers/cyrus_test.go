package workers_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/mutation"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
	"github.com/mailfathom/mailfathom/internal/testharness/wiretap"
)

// The tests in this file run the server-dependent behaviour of the units
// against Cyrus IMAP 3.6, a second real server beside Dovecot: the same
// product code paths, the same configuration, another implementation of
// the extensions. Where a test shares the binary's Cyrus, its isolation
// comes from a user of its own.

// setupCyrusSync is setupSyncOn for a new user of the Cyrus s: one account
// over implicit TLS with the harness CA as its trusted authority. The
// bundle's Dovecot fields stay nil; the user is returned beside it.
func setupCyrusSync(t *testing.T, s *cyrus.Server) (*syncBundle, *cyrus.User) {
	t.Helper()
	u := s.NewUser()
	files, err := s.CA().WriteFiles(t.TempDir())
	require.NoError(t, err)
	b := &syncBundle{
		pool: dbtest.Pool(t),
		logs: &capture.Buffer{},
		env:  accountEnv(t, s.Host(), s.TLSPort(), u.Name(), u.Password()),
	}
	b.env["MAILFATHOM_ACCOUNTS_0_CERTIFICATE_TRUST"] = "AdditionalTrustedAuthority"
	b.env["MAILFATHOM_ACCOUNTS_0_TRUSTED_CERTIFICATE_AUTHORITY"] = "file:" + files.CACert
	t.Cleanup(func() {
		if b.stop != nil {
			b.stop()
		}
	})
	return b, u
}

// appendAll appends raws to folder in order and returns their UIDs.
func appendAll(u *cyrus.User, folder string, raws [][]byte, flags ...imap.Flag) []imap.UID {
	uids := make([]imap.UID, len(raws))
	for i, raw := range raws {
		uids[i] = u.Append(folder, raw, time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i)*time.Minute), flags...)
	}
	return uids
}

func assertUnseenOnCyrus(t *testing.T, u *cyrus.User, folder string) {
	t.Helper()
	for _, uid := range u.UIDs(folder) {
		require.NotContains(t, u.Flags(folder, uid), imap.FlagSeen, "uid %d was marked read", uid)
	}
}

// TestCyrusFirstSyncIsByteIdentical: a first run stores every message of
// a Cyrus folder byte for byte as the server serves it (BODY.PEEK[] read
// afterwards over a session of the harness), over TLS with COMPRESS on,
// and marks nothing read. One message carries raw 8-bit bytes in a
// header, which Cyrus replaces with X on APPEND: what is stored is what
// the server holds, not what was appended.
func TestCyrusFirstSyncIsByteIdentical(t *testing.T) {
	t.Parallel()
	b, u := setupCyrusSync(t, cyrus.Shared(t))
	b.env["MAILFATHOM_SYNC_MAX_METADATA_BATCH_SIZE"] = "10"
	// Cyrus is on the loopback, where compression is off by default.
	b.env["MAILFATHOM_ACCOUNTS_0_COMPRESSION"] = "on"
	var raws [][]byte
	for i := range 24 {
		raws = append(raws, mailgen.Realistic(41, i))
	}
	raws = append(raws, mailgen.Message(41, 100, 200_000)) // an attachment past the text limit
	munged := []byte("From: Sender <sender@example.test>\r\nSubject: caf\xc3\xa9 au lait\r\nMessage-ID: <munged@example.test>\r\n\r\nbody caf\xc3\xa9\r\n")
	raws = append(raws, munged)
	uids := appendAll(u, "INBOX", raws)
	b.start(t)
	b.waitIdle(t)

	rows := b.stored(t, "INBOX")
	require.Len(t, rows, len(raws))
	for i, r := range rows {
		require.Equal(t, int64(uids[i]), r.uid)
		require.Equal(t, "Available", r.availability)
		served := u.Message("INBOX", uids[i]).FindBodySection(&imap.FetchItemBodySection{})
		sum := sha256.Sum256(served)
		require.Equal(t, sum[:], r.sha, "uid %d differs from what Cyrus serves", r.uid)
		require.Equal(t, int64(len(served)), *r.length)
		if i < len(raws)-1 {
			require.Equal(t, raws[i], served, "uid %d: Cyrus serves what was appended", r.uid)
		}
	}
	served := u.Message("INBOX", uids[len(uids)-1]).FindBodySection(&imap.FetchItemBodySection{})
	require.False(t, bytes.Equal(munged, served), "Cyrus rewrote the 8-bit header")
	require.Contains(t, string(served), "Subject: cafXX au lait\r\n")
	assertUnseenOnCyrus(t, u, "INBOX")

	// A second run fetches no body; mail appended later arrives on the next.
	b.runAgain(t)
	require.EqualValues(t, 0, b.lastPassOutput(t, "INBOX")["stored"])
	later := mailgen.Message(41, 200, 3000)
	u.Append("INBOX", later, time.Now())
	b.runAgain(t)
	rows = b.stored(t, "INBOX")
	require.Len(t, rows, len(raws)+1)
	sum := sha256.Sum256(later)
	require.Equal(t, sum[:], rows[len(rows)-1].sha)
	assertUnseenOnCyrus(t, u, "INBOX")

	// Every session MailFathom opened sent only read-only commands, seen in
	// the server's record of them (they ran over TLS, compressed).
	sessions := u.Sessions()
	require.NotEmpty(t, sessions)
	compressed := false
	for _, lines := range sessions {
		for _, l := range lines {
			require.False(t, wiretap.Forbidden(l), "a session sent %q", l)
			compressed = compressed || strings.Contains(l, "COMPRESS DEFLATE")
		}
	}
	require.True(t, compressed, "the content sessions negotiated COMPRESS")
}

// TestCyrusReconciliation: a flag set, a flag cleared and two expunges on
// Cyrus reach the local copy by each reconciliation path the server can be
// made to advertise (QRESYNC by default; CONDSTORE and plain FLAGS with
// the others suppressed), and a second window over the observed mail is
// narrowed by CHANGEDSINCE where modification sequences are offered.
func TestCyrusReconciliation(t *testing.T) {
	t.Parallel()
	want := map[int64]string{1: `\Flagged`, 2: ` [tombstone]`, 3: ``, 4: ``, 5: ` [tombstone]`, 6: ``}
	for name, opts := range map[string][]cyrus.Option{
		"QResync":   nil,
		"CondStore": {cyrus.WithoutCapabilities("QRESYNC")},
		"Plain":     {cyrus.WithoutCapabilities("QRESYNC", "CONDSTORE")},
	} {
		t.Run(name+"ReachesTheSameEndState", func(t *testing.T) {
			t.Parallel()
			srv := cyrus.Shared(t)
			if opts != nil {
				srv = cyrus.Start(t, opts...)
			}
			b, u := setupCyrusSync(t, srv)
			b.env["MAILFATHOM_ACCOUNTS_0_REMOTELY_DELETED_EMAIL_DISPOSITION"] = "RetainTombstone"
			b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
			b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
			var raws [][]byte
			for i := range 6 {
				raws = append(raws, mailgen.Message(20, i, 1500))
			}
			uids := appendAll(u, "INBOX", raws)
			require.Equal(t, []imap.UID{1, 2, 3, 4, 5, 6}, uids)
			u.SetFlags("INBOX", 4, []imap.Flag{imap.FlagAnswered}, nil)
			b.start(t)
			b.waitIdle(t)
			require.Len(t, b.stored(t, "INBOX"), 6)

			u.SetFlags("INBOX", 1, []imap.Flag{imap.FlagFlagged}, nil)
			u.SetFlags("INBOX", 4, nil, []imap.Flag{imap.FlagAnswered})
			u.Expunge("INBOX", 2, 5)
			b.runAgain(t)
			b.runAgain(t)
			require.Equal(t, want, b.reconciled(t))
			assertUnseenOnCyrus(t, u, "INBOX")
			require.Contains(t, b.logs.String(), "messages left the folder on the server")

			modseq := dbassert.Checkpoint(t, b.pool, "INBOX").HighestModSeq
			changedSince := 0
			for _, lines := range u.Sessions() {
				for _, l := range lines {
					if strings.Contains(l, "(CHANGEDSINCE ") {
						changedSince++
					}
				}
			}
			if name == "Plain" {
				require.Nil(t, modseq)
				require.Zero(t, changedSince)
				return
			}
			require.NotNil(t, modseq, "a pass that emptied the queue records the folder's modification sequence")
			require.Equal(t, u.HighestModSeq("INBOX"), *modseq)
			require.Positive(t, changedSince, "a later window asks only what changed since the recorded sequence")
		})
	}
}

// TestCyrusPushWatchesEachFolderWithIdle: Cyrus offers IDLE and no
// NOTIFY, so a push account gets one watching session per folder; a
// delivery into either folder is stored within seconds, and a flag change
// and an expunge are reflected as fast, long before the interval.
func TestCyrusPushWatchesEachFolderWithIdle(t *testing.T) {
	t.Parallel()
	b, u := setupCyrusSync(t, cyrus.Shared(t))
	b.env["MAILFATHOM_SYNC_INTERVAL"] = "10m"
	b.env["MAILFATHOM_SYNC_MAX_FAILURE_BACKOFF"] = "10m"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_SPECIAL_USE"] = "Inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "archive"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_SPECIAL_USE"] = "Archive"
	b.env["MAILFATHOM_ACCOUNTS_0_MODE"] = "Push"
	b.start(t)
	b.waitLog(t, pushBound, line("mail server advertises no NOTIFY capability, so each folder is watched over a connection of its own",
		"account", "primary", "subscription_retried_in", 15*time.Minute),
		modeLine("INBOX", "Push"), modeLine("ARCHIVE", "Push"))
	b.waitIdle(t)
	require.Empty(t, b.stored(t, "INBOX"))

	u.Append("Archive", mailgen.Message(78, 1, 2000), time.Time{})
	took := b.waitStored(t, "ARCHIVE", 1, pushBound)
	t.Logf("delivery to Archive stored after %v", took)
	uid := u.Append("INBOX", mailgen.Message(78, 2, 2000), time.Time{})
	took = b.waitStored(t, "INBOX", 1, pushBound)
	t.Logf("delivery to INBOX stored after %v", took)

	u.SetFlags("INBOX", uid, []imap.Flag{imap.FlagFlagged}, nil)
	b.waitFlags(t, `\Flagged`, pushBound)
	u.Expunge("INBOX", uid)
	// Expunging sets \Deleted first; Cyrus may report that flag before
	// the message vanishes, and the tombstone keeps the flags last seen.
	poll.Until(t, pushBound, "the INBOX message is tombstoned", func() (bool, string) {
		stored := dbassert.Occurrences(t, b.pool, "INBOX")
		if len(stored) != 1 {
			return false, fmt.Sprintf("%d messages stored", len(stored))
		}
		got := stored[0].State()
		return got == `\Flagged [tombstone]` || got == `\Flagged \Deleted [tombstone]`, got
	})

	require.NotZero(t, b.countLog(line("mail server reported a change in a watched folder", "account", "primary", "alias", "ARCHIVE")))
	require.NotContains(t, b.logs.String(), "through one push subscription")
	assertUnseenOnCyrus(t, u, "INBOX")

	// Each folder's watch examined its folder and idled, nothing else.
	watches := 0
	for _, lines := range u.Sessions() {
		text := strings.Join(lines, "\n")
		if !strings.Contains(text, " IDLE") {
			continue
		}
		watches++
		for _, l := range lines {
			require.Regexp(t, `^(\S+ (EXAMINE "[^"]*"( \(CONDSTORE\))?|IDLE|LOGOUT|COMPRESS DEFLATE|ENABLE .*)|DONE)$`, l)
		}
	}
	require.GreaterOrEqual(t, watches, 2, "a watching session per folder")
}

// TestCyrusMoveCarriesTheStoredEmail: with MOVE and UIDPLUS, each kind of
// change MailFathom makes ends as asked on Cyrus; the move is
// one UID MOVE whose COPYUID the next run joins, so the stored email is
// carried across (same row, same content, no body fetched) rather than
// stored again, and the copy is stored once. Cyrus's EMAILID of a
// placed message is the source's.
func TestCyrusMoveCarriesTheStoredEmail(t *testing.T) {
	t.Parallel()
	srv := cyrus.Shared(t)
	sb, u := setupCyrusSync(t, srv)
	b := &mutationBundle{syncBundle: sb}
	// The read sessions go over the plain listener, recorded, while the
	// write side works over TLS.
	var reads wiretap.Recorder
	b.openRead = func(ctx context.Context, ep imapx.Endpoint) (*imapx.ReadSession, error) {
		ep.Security, ep.Port = imapx.None, srv.Port()
		ep.AllowInsecureConnection, ep.AllowClearTextOverUnencrypted = true, true
		ep.Dial = reads.Dial(srv.Addr())
		return imapx.OpenReadSession(ctx, ep, imapx.SessionOptions{})
	}
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "archive"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "Filed"
	u.CreateFolder("Filed")
	for i := range 5 {
		var flags []imap.Flag
		if i == 4 {
			flags = append(flags, imap.FlagSeen)
		}
		b.uids = append(b.uids, u.Append("INBOX", mailgen.Message(14, i, 1200), time.Time{}, flags...))
	}
	b.owners = u.Append("INBOX", mailgen.Message(14, 9, 1200), time.Time{}, imap.FlagDeleted)
	b.start(t)
	b.waitIdle(t)
	sourceIDs := u.EmailIDs("INBOX")

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
	moved := b.mutation(t, move.ID)
	require.Equal(t, mailstore.PathMove, moved.Path)
	require.NotZero(t, moved.PlacedUID, "the server's COPYUID is recorded")
	require.Equal(t, u.UIDValidity("Filed"), moved.PlacedUIDValidity)
	copied := b.mutation(t, cp.ID)

	inbox := u.UIDs("INBOX")
	require.NotContains(t, inbox, b.uids[0], "moved away")
	require.Contains(t, inbox, b.uids[1], "a copy leaves the source")
	require.NotContains(t, inbox, b.uids[2], "deleted")
	require.Contains(t, inbox, b.owners, "the owner's own \\Deleted message is never expunged by us")
	require.Len(t, u.UIDs("Filed"), 2, "the moved message and the copy, each once")
	require.Contains(t, u.Flags("INBOX", b.uids[3]), imap.FlagSeen)
	require.NotContains(t, u.Flags("INBOX", b.uids[4]), imap.FlagSeen)
	filedIDs := u.EmailIDs("Filed")
	require.Equal(t, sourceIDs[b.uids[0]], filedIDs[imap.UID(moved.PlacedUID)], "a move keeps the EMAILID")
	require.Equal(t, sourceIDs[b.uids[1]], filedIDs[imap.UID(copied.PlacedUID)], "a copy keeps the EMAILID")

	contentBefore := dbassert.OccurrenceByID(t, b.pool, move.EmailID).ContentSHA256
	require.NotNil(t, contentBefore)
	before := len(reads.Lines())
	b.runAgain(t)
	for _, l := range reads.Lines()[before:] {
		require.NotContains(t, l, "BODY.PEEK[", "the moved message is carried and the copy keeps its EMAILID: nothing to fetch; jobs:\n%s", b.jobHistory(t))
	}
	carried, found, err := mailstore.ReadMutableEmail(context.Background(), b.pool, move.EmailID)
	require.NoError(t, err)
	require.True(t, found)
	require.False(t, carried.Tombstoned)
	require.Equal(t, "ARCHIVE", carried.Alias)
	require.Equal(t, moved.PlacedUID, carried.UID)
	require.Equal(t, contentBefore, dbassert.OccurrenceByID(t, b.pool, move.EmailID).ContentSHA256)
	require.Len(t, b.stored(t, "ARCHIVE"), 2, "the carried email and the copy, no third row")
	out := b.lastPassOutput(t, "ARCHIVE")
	require.EqualValues(t, 1, out["carried_by_mailfathom"])
	require.EqualValues(t, 1, out["copied_by_mailfathom"])
	require.EqualValues(t, 0, out["stored"], "no body was fetched")
	require.EqualValues(t, 1, out["shared"], "the copy is an occurrence of the email its source holds")
	for _, id := range []string{"msg-14-0@example.test", "msg-14-1@example.test"} {
		served := 0
		for _, o := range dbassert.Occurrences(t, b.pool, "") {
			if o.Served && o.MessageID == id {
				served++
			}
		}
		require.Equal(t, 1, served, "the moved message and the copied one are each served once")
	}
	require.Equal(t, 1, tombstones(t, b.pool), "only the email MailFathom deleted")
	require.Len(t, b.stored(t, "INBOX"), 5, "the copied, read, unread and owner's messages, and the deleted one tombstoned")
	names := wiretap.RequireReadOnly(t, &reads)
	require.Contains(t, names, "EXAMINE")
}

// TestCyrusUIDValidityChangeStartsOver: a folder deleted and created again
// on Cyrus has a new UIDVALIDITY; the next run stores it from UID 1 under
// the new value, keeps the abandoned UID space unserved, and deletes
// nothing it should not: each message is served once.
func TestCyrusUIDValidityChangeStartsOver(t *testing.T) {
	t.Parallel()
	b, u := setupCyrusSync(t, cyrus.Shared(t))
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "filed"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "Filed"
	u.CreateFolder("Filed")
	var raws [][]byte
	for i := range 5 {
		raws = append(raws, mailgen.Message(4, i, 1500))
	}
	appendAll(u, "Filed", raws)
	b.start(t)
	b.waitIdle(t)
	require.Len(t, b.stored(t, "FILED"), 5)
	search := func() []searchindex.Hit {
		hits, err := searchindex.Search(context.Background(), b.pool, searchindex.Query{
			Text: "synthetic", Accounts: []string{"primary"}, Configuration: "simple", Limit: 100})
		require.NoError(t, err)
		return hits
	}
	require.Len(t, search(), 5)

	oldValidity := int64(u.UIDValidity("Filed"))
	u.RecreateFolder("Filed")
	appendAll(u, "Filed", raws)
	b.runAgain(t)

	rows := b.stored(t, "FILED")
	require.Len(t, rows, 10, "the old UID space is kept, the new one stored from UID 1")
	newValidity := int64(u.UIDValidity("Filed"))
	byValidity := map[int64][]int64{}
	for _, r := range rows {
		byValidity[r.uidValidity] = append(byValidity[r.uidValidity], r.uid)
	}
	require.Equal(t, map[int64][]int64{oldValidity: {1, 2, 3, 4, 5}, newValidity: {1, 2, 3, 4, 5}}, byValidity)
	require.EqualValues(t, newValidity, dbassert.Checkpoint(t, b.pool, "FILED").UIDValidity)

	require.Len(t, search(), 5, "each message once")
	require.Equal(t, []int64{newValidity}, b.servedValidities(t))
	out := b.lastPassOutput(t, "FILED")
	require.Equal(t, map[string]any{"replaced": true, "invalidated": float64(5)}, out["scope"])
	require.Equal(t, 1, strings.Count(b.logs.String(), "the folder was recreated on the server (its UIDVALIDITY changed)"), "logged once")
	require.Zero(t, tombstones(t, b.pool), "nothing was taken for an expunge")
}

// TestCyrusOneLoginPerRun: on Cyrus too an account run, the pass it
// carries and the window that pass carries share one session; Cyrus's own
// record of the user's sessions counts them.
func TestCyrusOneLoginPerRun(t *testing.T) {
	t.Parallel()
	b, u := setupCyrusSync(t, cyrus.Shared(t))
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	appendAll(u, "INBOX", [][]byte{mailgen.Message(61, 1, 900), mailgen.Message(61, 2, 900), mailgen.Message(61, 3, 900)})
	b.start(t)
	b.waitIdle(t)
	u.SetFlags("INBOX", 2, []imap.Flag{imap.FlagFlagged}, nil)
	b.runAgain(t)
	require.Equal(t, map[int64]string{1: ``, 2: `\Flagged`, 3: ``}, b.reconciled(t))

	runs := dbassert.JobCount(t, b.pool, "account_run", rivertype.JobStateCompleted)
	require.Equal(t, 2, runs)
	require.Len(t, u.Sessions(), runs, "one session for each of %d runs", runs)
}

// TestCyrusMissingDestinationIsRefusedAtTheFirstAttempt: a move into a
// folder deleted on Cyrus is refused by the server, recognized as a
// missing destination and dead-lettered at its first attempt, the source
// left in place.
func TestCyrusMissingDestinationIsRefusedAtTheFirstAttempt(t *testing.T) {
	t.Parallel()
	sb, u := setupCyrusSync(t, cyrus.Shared(t))
	b := &mutationBundle{syncBundle: sb}
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "archive"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "Filed"
	u.CreateFolder("Filed")
	b.uids = append(b.uids, u.Append("INBOX", mailgen.Message(15, 1, 800), time.Time{}))
	b.start(t)
	b.waitIdle(t)
	u.DeleteFolder("Filed")
	move := b.request(t, b.uids[0], "move", "archive")
	b.waitIdle(t)
	got := b.mutation(t, move.ID)
	require.Equal(t, mailstore.MutationDeadLettered, got.State, "failure code %q; jobs:\n%s", got.FailureCode, b.jobHistory(t))
	require.Equal(t, mutation.CodeDestinationMissing, got.FailureCode)
	require.Equal(t, 1, got.Attempts)
	require.Contains(t, u.UIDs("INBOX"), b.uids[0])
}
