package mailstore_test

import (
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestAliasFilterSeesSharedOccurrences: a message held in All Mail with
// occurrences in INBOX and a label folder is in all three aliases while
// each occurrence lives, and leaves an alias when its occurrence there is
// tombstoned or of a UID space the folder no longer serves.
func TestAliasFilterSeesSharedOccurrences(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)

	all := bind(ctx, t, pool, "gmail", "ALL", "[Gmail]/All Mail")
	inbox := bind(ctx, t, pool, "gmail", "INBOX", "INBOX")
	work := bind(ctx, t, pool, "gmail", "WORK", "Work")
	store := func(b mailstore.Binding, uid uint32, key string, holder uuid.UUID) uuid.UUID {
		o := mailstore.Occurrence{AccountID: b.AccountID, FolderID: b.ID, UIDValidity: 1, UID: uid, Size: 1,
			Availability: mailstore.Available, ServerEmailID: key, SharedEmailID: holder}
		if holder == uuid.Nil {
			o.Raw = []byte("x")
		}
		id, err := mailstore.UpsertOccurrence(ctx, pool, o)
		require.NoError(t, err)
		return id
	}
	held := store(all, 1, "x-gm-msgid:1", uuid.Nil)
	inInbox := store(inbox, 1, "x-gm-msgid:1", held)
	store(work, 1, "x-gm-msgid:1", held)
	alone := store(all, 2, "x-gm-msgid:2", uuid.Nil)

	in := func(alias string) []uuid.UUID {
		t.Helper()
		f := mailstore.EmailFilter{Accounts: []string{"gmail"}, Alias: alias}
		list, err := mailstore.ListEmails(ctx, pool, f, nil, 10)
		require.NoError(t, err)
		out := []uuid.UUID{}
		for _, e := range list {
			out = append(out, e.ID)
		}
		filtered, err := mailstore.FilterEmails(ctx, pool, []uuid.UUID{held, alone}, f)
		require.NoError(t, err)
		require.Len(t, filtered, len(out), "FilterEmails narrows alike")
		return out
	}
	require.ElementsMatch(t, []uuid.UUID{held, alone}, in("ALL"))
	require.Equal(t, []uuid.UUID{held}, in("INBOX"), "its INBOX occurrence")
	require.Equal(t, []uuid.UUID{held}, in("WORK"), "its label folder's")
	for _, alias := range []string{"INBOX", "WORK"} {
		shared, err := mailstore.AliasShared(ctx, pool, []string{"gmail"}, "", alias)
		require.NoError(t, err)
		require.True(t, shared, alias)
	}
	shared, err := mailstore.AliasShared(ctx, pool, []string{"gmail"}, "", "ALL")
	require.NoError(t, err)
	require.False(t, shared, "All Mail holds its own emails")

	// Its INBOX occurrence expunged: no longer in INBOX, still in WORK.
	_, err = pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, inInbox)
	require.NoError(t, err)
	require.Empty(t, in("INBOX"))
	require.Equal(t, []uuid.UUID{held}, in("WORK"))

	// The label folder recreated (another UID space served): out of WORK.
	_, err = pool.Exec(ctx, `UPDATE mail_folders SET served_uid_validity = 2 WHERE id = $1`, work.ID)
	require.NoError(t, err)
	require.Empty(t, in("WORK"))

	// It left All Mail but lives in INBOX again: served, in INBOX only.
	_, err = pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = CASE WHEN id = $1 THEN now() END
		WHERE id IN ($1, $2)`, held, inInbox)
	require.NoError(t, err)
	require.Equal(t, []uuid.UUID{alone}, in("ALL"))
	require.Equal(t, []uuid.UUID{held}, in("INBOX"))
}
