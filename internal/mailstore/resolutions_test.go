package mailstore_test

import (
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

// TestResolutions: a run's resolutions replace the previous run's whole —
// an alias the latest run did not resolve keeps no binding — and the
// account's version moves only when they differ, so a watch polling it
// learns of a repointed or vanished folder and of nothing else.
func TestResolutions(t *testing.T) {
	t.Parallel()
	ctx := testContext(t)
	pool := dbtest.Pool(t)
	aliases := []string{"INBOX", "ARCHIVE", "SENT"}
	none, err := mailstore.ReadResolvedFolders(ctx, pool, "acct", aliases)
	require.NoError(t, err)
	require.Equal(t, mailstore.ResolvedFolders{Bindings: map[string]mailstore.Binding{}, Unresolved: map[string]string{}}, none)

	var inbox, archive, archive2 mailstore.Binding
	record := func(rs func() []mailstore.Resolution) bool {
		t.Helper()
		var changed bool
		require.NoError(t, pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			id, err := mailstore.EnsureAccount(ctx, tx, "acct")
			if err != nil {
				return err
			}
			if inbox.ID == 0 {
				bind := func(alias, path string) mailstore.Binding {
					b, _, _, err := mailstore.CommitBinding(ctx, tx, id, alias, path, "/")
					require.NoError(t, err)
					return b
				}
				inbox, archive = bind("INBOX", "INBOX"), bind("ARCHIVE", "Archive")
				archive2 = bind("ARCHIVE", "Archive 2026")
			}
			changed, err = mailstore.RecordResolutions(ctx, tx, "acct", rs())
			return err
		}))
		return changed
	}
	read := func() mailstore.ResolvedFolders {
		t.Helper()
		got, err := mailstore.ReadResolvedFolders(ctx, pool, "acct", aliases)
		require.NoError(t, err)
		return got
	}

	require.True(t, record(func() []mailstore.Resolution {
		return []mailstore.Resolution{{Alias: "INBOX", BindingID: inbox.ID}, {Alias: "ARCHIVE", BindingID: archive.ID}, {Alias: "SENT", Failure: "MailFolderAliasUnresolved"}}
	}))
	got := read()
	require.Equal(t, int64(1), got.Version)
	require.Equal(t, map[string]mailstore.Binding{"INBOX": inbox, "ARCHIVE": archive}, got.Bindings)
	require.Equal(t, map[string]string{"SENT": "MailFolderAliasUnresolved"}, got.Unresolved)

	require.False(t, record(func() []mailstore.Resolution {
		return []mailstore.Resolution{{Alias: "INBOX", BindingID: inbox.ID}, {Alias: "ARCHIVE", BindingID: archive.ID}, {Alias: "SENT", Failure: "MailFolderAliasUnresolved"}}
	}), "the same resolutions again")
	require.Equal(t, int64(1), read().Version)

	// The archive repointed, the inbox gone from the server.
	require.True(t, record(func() []mailstore.Resolution {
		return []mailstore.Resolution{{Alias: "INBOX", Failure: "MailFolderAliasUnresolved"}, {Alias: "ARCHIVE", BindingID: archive2.ID}, {Alias: "SENT", Failure: "MailFolderAliasUnresolved"}}
	}))
	got = read()
	require.Equal(t, int64(2), got.Version)
	require.Equal(t, map[string]mailstore.Binding{"ARCHIVE": archive2}, got.Bindings)
	require.Equal(t, map[string]string{"INBOX": "MailFolderAliasUnresolved", "SENT": "MailFolderAliasUnresolved"}, got.Unresolved)

	versions, err := mailstore.ResolutionVersions(ctx, pool, []string{"acct", "other"})
	require.NoError(t, err)
	require.Equal(t, map[string]int64{"acct": 2}, versions)

	err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
		_, err := mailstore.RecordResolutions(ctx, tx, "acct", []mailstore.Resolution{{Alias: "INBOX"}})
		return err
	})
	require.Error(t, err, "a resolution names its binding or its failure")
}
