package searchindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/mimex"
)

// TestSearchAliasSeesSharedOccurrences: a message held in All Mail with an
// occurrence in INBOX is found by a search of INBOX while that occurrence
// lives, by mailfathom_search and by a search of given messages alike; a
// message of All Mail alone is not.
func TestSearchAliasSeesSharedOccurrences(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	accountID, err := mailstore.EnsureAccount(ctx, pool, "gmail")
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	all, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "ALL", "[Gmail]/All Mail", "/")
	require.NoError(t, err)
	inbox, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
	require.NoError(t, err)
	store := func(uid uint32, key, subject string) uuid.UUID {
		raw := []byte("From: office@example.test\r\nSubject: " + subject + "\r\nDate: Mon, 02 Jun 2025 10:00:00 +0000\r\n\r\ncormorants nesting\r\n")
		rec := searchindex.Extract(uuid.Nil, raw, mimex.DefaultLimits())
		id, err := searchindex.WriteOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: all.ID,
			UIDValidity: 1, UID: uid, Size: int64(len(raw)), Availability: mailstore.Available, Raw: raw, ServerEmailID: key}, &rec)
		require.NoError(t, err)
		return id
	}
	held := store(1, "x-gm-msgid:1", "in the inbox")
	all1 := store(2, "x-gm-msgid:2", "archived")
	occurrence, err := mailstore.UpsertOccurrence(ctx, tx, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID,
		UIDValidity: 1, UID: 1, Size: 1, Availability: mailstore.Available, ServerEmailID: "x-gm-msgid:1", SharedEmailID: held})
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))

	search := func(alias string, emails []uuid.UUID) []uuid.UUID {
		t.Helper()
		hits, err := searchindex.Search(ctx, pool, searchindex.Query{Text: "cormorants", Accounts: []string{"gmail"},
			Alias: alias, Emails: emails, Configuration: "simple"})
		require.NoError(t, err)
		out := []uuid.UUID{}
		for _, h := range hits {
			out = append(out, h.StoredEmailID)
		}
		return out
	}
	both := []uuid.UUID{held, all1}
	for _, emails := range [][]uuid.UUID{nil, both} {
		require.Equal(t, []uuid.UUID{held}, search("INBOX", emails), "by its INBOX occurrence")
		require.ElementsMatch(t, both, search("ALL", emails))
	}
	_, err = pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, occurrence)
	require.NoError(t, err)
	for _, emails := range [][]uuid.UUID{nil, both} {
		require.Empty(t, search("INBOX", emails), "it left INBOX")
	}
}
