package mailstore_test

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestListEmails pages through messages that share one received time:
// the id breaks the tie, so every served message appears exactly once,
// and neither a tombstoned message nor an account outside Accounts does.
func TestListEmails(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool, err := pgxpool.New(ctx, dbtest.URL(t))
	require.NoError(t, err)
	defer pool.Close()

	inbox := bind(ctx, t, pool, "listed", "INBOX", "INBOX")
	other := bind(ctx, t, pool, "unlisted", "INBOX", "INBOX")
	same := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	store := func(b mailstore.Binding, uid uint32, at time.Time, flags ...string) uuid.UUID {
		id, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: b.AccountID, FolderID: b.ID,
			UIDValidity: 1, UID: uid, Size: 1, InternalDate: at, Flags: flags, Raw: []byte("x"), Availability: mailstore.Available})
		require.NoError(t, err)
		return id
	}
	want := map[uuid.UUID]bool{}
	for uid := uint32(1); uid <= 5; uid++ {
		want[store(inbox, uid, same)] = true
	}
	newest := store(inbox, 6, same.Add(time.Hour), `\Seen`, `\Flagged`)
	want[newest] = true
	gone := store(inbox, 7, same.Add(2*time.Hour))
	_, err = pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, gone)
	require.NoError(t, err)
	store(other, 1, same)

	f := mailstore.EmailFilter{Accounts: []string{"listed"}}
	var (
		seen  = map[uuid.UUID]bool{}
		after *mailstore.EmailCursor
		pages int
	)
	for {
		page, err := mailstore.ListEmails(ctx, pool, f, after, 2)
		require.NoError(t, err)
		if len(page) == 0 {
			break
		}
		pages++
		if pages == 1 {
			require.Equal(t, newest, page[0].ID, "newest first")
			require.False(t, page[0].Unread)
			require.True(t, page[0].Flagged)
		}
		for _, e := range page {
			require.False(t, seen[e.ID], "listed twice")
			seen[e.ID] = true
			require.Equal(t, e.ID != newest, e.Unread)
		}
		last := page[len(page)-1]
		after = &mailstore.EmailCursor{Received: last.ReceivedAt, ID: last.ID}
	}
	require.Equal(t, want, seen)
	require.Equal(t, 3, pages)

	unread := true
	list, err := mailstore.ListEmails(ctx, pool, mailstore.EmailFilter{Accounts: []string{"listed"}, Unread: &unread}, nil, 10)
	require.NoError(t, err)
	require.Len(t, list, 5)
	list, err = mailstore.FilterEmails(ctx, pool, []uuid.UUID{gone, newest}, f)
	require.NoError(t, err)
	require.Len(t, list, 1, "a tombstoned message is not served")
	_, found, err := mailstore.ReadEmail(ctx, pool, []string{"unlisted"}, newest)
	require.NoError(t, err)
	require.False(t, found, "another account's message is not read")
	e, found, err := mailstore.ReadEmail(ctx, pool, []string{"listed"}, newest)
	require.NoError(t, err)
	require.True(t, found)
	require.Equal(t, "INBOX", e.Alias)
	require.Empty(t, e.Participants)
}
