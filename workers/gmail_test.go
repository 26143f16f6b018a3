package workers_test

import (
	"context"
	"slices"
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/google/uuid"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/gmailtest"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

// setupGmailSync is setupSyncOn for the Gmail-like server s (package
// gmailtest): one account over its plain loopback listener, bound to
// [Gmail]/All Mail, INBOX and the label folder Work.
func setupGmailSync(t *testing.T, s *gmailtest.Server) *syncBundle {
	t.Helper()
	u := s.User()
	b := &syncBundle{
		pool: dbtest.Pool(t),
		logs: &capture.Buffer{},
		env:  accountEnv(t, s.Host(), s.Port(), u.Name(), u.Password()),
	}
	for k, v := range map[string]string{
		"CONNECTION_SECURITY":       "None",
		"ALLOW_INSECURE_CONNECTION": "true",
		"ALLOW_CLEAR_TEXT_AUTHENTICATION_OVER_UNENCRYPTED_CONNECTION": "true",
		"FOLDERS_0_ALIAS":       "all",
		"FOLDERS_0_REMOTE_PATH": gmailtest.AllMail,
		"FOLDERS_1_ALIAS":       "inbox",
		"FOLDERS_1_REMOTE_PATH": "INBOX",
		"FOLDERS_2_ALIAS":       "work",
		"FOLDERS_2_REMOTE_PATH": "Work",
	} {
		b.env["MAILFATHOM_ACCOUNTS_0_"+k] = v
	}
	t.Cleanup(func() {
		if b.stop != nil {
			b.stop()
		}
	})
	return b
}

// gmailLabels returns the labels stored on the served email of the
// message whose Message-ID is messageID.
func (b *syncBundle) gmailLabels(t *testing.T, messageID string) []string {
	t.Helper()
	for _, o := range dbassert.Occurrences(t, b.pool, "") {
		if o.Served && o.MessageID == messageID {
			return o.Labels
		}
	}
	require.Failf(t, "not served", "no served message %s", messageID)
	return nil
}

// TestGmailMessageInThreeFoldersIsStoredOnce: on a Gmail-like server a
// message labelled \Inbox and Work shows in All Mail, INBOX and Work
// under one X-GM-MSGID. With the three folders bound it is stored once —
// one raw MIME, found once by search — with an occurrence per folder; it
// is served while any occurrence lives, and a label removed on the server
// leaves its stored labels with the next reconciliation.
func TestGmailMessageInThreeFoldersIsStoredOnce(t *testing.T) {
	t.Parallel()
	srv := gmailtest.Start(t)
	b := setupGmailSync(t, srv)
	m := srv.Deliver(mailgen.Message(71, 1, 3000), gmailtest.LabelInbox, "Work")
	srv.Deliver(mailgen.Message(71, 2, 3000))
	srv.Deliver(mailgen.Message(71, 3, 3000), gmailtest.LabelInbox)
	const messageID = "msg-71-1@example.test"
	b.start(t)
	b.waitIdle(t)

	require.Equal(t, identityCounts{occurrences: 6, contents: 3, documents: 3, served: 3}, b.identityCounts(t),
		"three messages, six occurrences, each message's content once")
	search := func() map[uuid.UUID]int {
		hits, err := searchindex.Search(context.Background(), b.pool, searchindex.Query{
			Text: "synthetic", Accounts: []string{"primary"}, Configuration: "simple", Limit: 100})
		require.NoError(t, err)
		found := map[uuid.UUID]int{}
		for _, h := range hits {
			found[h.StoredEmailID]++
		}
		return found
	}
	found := search()
	require.Len(t, found, 3, "each message found once")
	for id, n := range found {
		require.Equal(t, 1, n, "email %s", id)
	}
	require.ElementsMatch(t, []string{gmailtest.LabelInbox, "Work"}, b.gmailLabels(t, messageID))
	var threads []string
	for _, o := range dbassert.Occurrences(t, b.pool, "") {
		if o.MessageID == messageID && o.ServerThreadID != "" && !slices.Contains(threads, o.ServerThreadID) {
			threads = append(threads, o.ServerThreadID)
		}
	}
	require.Len(t, threads, 1, "one thread across the folders")
	runs := dbassert.JobCount(t, b.pool, "account_run", rivertype.JobStateCompleted)
	carried := carried(b.completed(t, "folder_pass")) + carried(b.completed(t, "reconcile_window"))
	require.Equal(t, 6, carried, "the run carried the three folders' passes and their windows")
	require.Equal(t, runs, srv.Sessions(), "one login per run, identities asked on the pass's own connection")

	// \Inbox removed on the server: the message leaves INBOX, stays in
	// All Mail and Work, is still served and found once, and its labels
	// say so after the next reconciliation.
	srv.RemoveLabel(m, gmailtest.LabelInbox)
	b.runAgain(t)
	got := b.identityCounts(t)
	require.Equal(t, 3, got.served, "served while an occurrence lives")
	require.Equal(t, 3, got.contents)
	require.Len(t, search(), 3)
	require.Equal(t, []string{"Work"}, b.gmailLabels(t, messageID))

	// Work removed too: All Mail still shows it.
	srv.RemoveLabel(m, "Work")
	b.runAgain(t)
	require.Equal(t, 3, b.identityCounts(t).served)
	require.Empty(t, b.gmailLabels(t, messageID))
	for _, folder := range []string{gmailtest.AllMail, "INBOX"} {
		for _, uid := range srv.User().UIDs(folder) {
			require.NotContains(t, srv.User().Flags(folder, uid), imap.FlagSeen, "nothing was marked read")
		}
	}
}
