package mailstore_test

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestServerIdentityLabels: one Gmail message in two folders is one email
// holding one raw MIME; its labels are stored on that email, an
// occurrence of the other folder writes them there, and a label the server
// no longer describes is removed by the next reconciliation.
func TestServerIdentityLabels(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(t, err)
	bind := func(alias string) mailstore.Binding {
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		b, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, alias, alias, "/")
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return b
	}
	all, inbox := bind("ALL"), bind("INBOX")
	const key = "x-gm-msgid:1278455344230334866"
	holder, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: all.ID,
		UIDValidity: 7, UID: 3, Size: 9, Raw: []byte("x: y\r\n\r\nz"), Availability: mailstore.Available,
		ServerEmailID: key, Labels: []string{`\Inbox`, "Work"}})
	require.NoError(t, err)

	held, err := mailstore.EmailsByServerIdentity(ctx, pool, accountID, []string{key, "x-gm-msgid:1"})
	require.NoError(t, err)
	require.Equal(t, map[string]mailstore.SharedEmail{key: {ID: holder, Availability: mailstore.Available, Served: true}}, held)

	// Its occurrence tombstoned, the holder is still named, and not served.
	_, err = pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, holder)
	require.NoError(t, err)
	held, err = mailstore.EmailsByServerIdentity(ctx, pool, accountID, []string{key})
	require.NoError(t, err)
	require.Equal(t, map[string]mailstore.SharedEmail{key: {ID: holder, Availability: mailstore.Available}}, held)
	_, err = pool.Exec(ctx, `UPDATE stored_emails SET remote_expunge_observed_at = NULL WHERE id = $1`, holder)
	require.NoError(t, err)

	_, err = mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID,
		UIDValidity: 9, UID: 40, Size: 9, Availability: mailstore.Available, ServerEmailID: key,
		SharedEmailID: holder, Labels: []string{`\Inbox`, "Work", `\Important`}})
	require.NoError(t, err)
	_, err = mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: inbox.ID,
		UIDValidity: 9, UID: 41, Size: 9, Availability: mailstore.Available, SharedEmailID: holder})
	require.ErrorContains(t, err, "without a server identity")

	labels := func() []string {
		var l []string
		require.NoError(t, pool.QueryRow(ctx, `SELECT remote_labels FROM stored_emails WHERE id = $1`, holder).Scan(&l))
		return l
	}
	var contents, served int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM email_message_contents),
		(SELECT count(*) FROM served_stored_emails)`).Scan(&contents, &served))
	require.Equal(t, 1, contents)
	require.Equal(t, 1, served)
	require.Equal(t, []string{`\Inbox`, "Work", `\Important`}, labels(), "the newer observation, on the email")

	// The label Work is removed on the server: the INBOX window describes
	// the message without it.
	w, err := mailstore.SelectReconcileWindow(ctx, pool, inbox.ID, 9, 10)
	require.NoError(t, err)
	_, err = mailstore.ApplyReconciliation(ctx, pool, w, mailstore.ReconcileAnswer{
		Present: map[uint32]bool{40: true}, Flags: map[uint32][]string{40: {}},
		Labels: map[uint32][]string{40: {`\Inbox`, `\Important`}},
	}, mailstore.EraseLocalCopy)
	require.NoError(t, err)
	require.Equal(t, []string{`\Inbox`, `\Important`}, labels())
	e, ok, err := mailstore.ReadEmail(ctx, pool, []string{"primary"}, holder)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, []string{`\Inbox`, `\Important`}, e.Labels, "a reader is served the labels")

	// Every label removed is an empty list, not "unknown".
	w, err = mailstore.SelectReconcileWindow(ctx, pool, all.ID, 7, 10)
	require.NoError(t, err)
	_, err = mailstore.ApplyReconciliation(ctx, pool, w, mailstore.ReconcileAnswer{
		Present: map[uint32]bool{3: true}, Flags: map[uint32][]string{3: {}}, Labels: map[uint32][]string{3: {}},
	}, mailstore.EraseLocalCopy)
	require.NoError(t, err)
	require.Equal(t, []string{}, labels())

	// The holder's own occurrence leaves All Mail: under EraseLocalCopy the
	// email is kept (INBOX still shows it), tombstoned, and still served.
	w, err = mailstore.SelectReconcileWindow(ctx, pool, all.ID, 7, 10)
	require.NoError(t, err)
	res, err := mailstore.ApplyReconciliation(ctx, pool, w, mailstore.ReconcileAnswer{Present: map[uint32]bool{}}, mailstore.EraseLocalCopy)
	require.NoError(t, err)
	require.Equal(t, 1, res.Tombstoned, "%+v", res)
	require.Zero(t, res.Erased)
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM email_message_contents),
		(SELECT count(*) FROM served_stored_emails)`).Scan(&contents, &served))
	require.Equal(t, 1, contents)
	require.Equal(t, 1, served)
	require.NotEqual(t, uuid.Nil, holder)

	// The INBOX occurrence leaves too: the email is erased with it.
	w, err = mailstore.SelectReconcileWindow(ctx, pool, inbox.ID, 9, 10)
	require.NoError(t, err)
	_, err = mailstore.ApplyReconciliation(ctx, pool, w, mailstore.ReconcileAnswer{Present: map[uint32]bool{}}, mailstore.EraseLocalCopy)
	require.NoError(t, err)
	var rows int
	require.NoError(t, pool.QueryRow(ctx, `SELECT (SELECT count(*) FROM stored_emails), (SELECT count(*) FROM email_message_contents)`).Scan(&rows, &contents))
	require.Zero(t, rows)
	require.Zero(t, contents)
}

// TestListEmailsByLabel: a listing narrowed to a label keeps the emails
// carrying it, without regard to case; an email without labels (a server
// that has none) is kept by no label.
func TestListEmailsByLabel(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	pool := dbtest.Pool(t)
	accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
	require.NoError(t, err)
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	all, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "ALL", "ALL", "/")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	labelled, err := mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: all.ID,
		UIDValidity: 7, UID: 1, Size: 9, Raw: []byte("x: y\r\n\r\nz"), Availability: mailstore.Available,
		ServerEmailID: "x-gm-msgid:11", Labels: []string{`\Inbox`, "Work"}})
	require.NoError(t, err)
	_, err = mailstore.UpsertOccurrence(ctx, pool, mailstore.Occurrence{AccountID: accountID, FolderID: all.ID,
		UIDValidity: 7, UID: 2, Size: 9, Raw: []byte("x: y\r\n\r\nz"), Availability: mailstore.Available})
	require.NoError(t, err)

	list := func(label string) []uuid.UUID {
		got, err := mailstore.ListEmails(ctx, pool, mailstore.EmailFilter{Accounts: []string{"primary"}, Label: label}, nil, 10)
		require.NoError(t, err)
		ids := make([]uuid.UUID, len(got))
		for i, e := range got {
			ids[i] = e.ID
		}
		return ids
	}
	require.Len(t, list(""), 2)
	require.Equal(t, []uuid.UUID{labelled}, list("work"))
	require.Equal(t, []uuid.UUID{labelled}, list(`\INBOX`))
	require.Empty(t, list("Travel"))
}
