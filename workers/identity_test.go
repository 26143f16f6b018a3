package workers_test

import (
	"testing"

	"github.com/emersion/go-imap/v2"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/testharness/cyrus"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
)

// identityCounts are what one account's store holds: occurrence rows, raw
// MIME rows, search documents, served emails.
type identityCounts struct{ occurrences, contents, documents, served int }

func (b *syncBundle) identityCounts(t *testing.T) identityCounts {
	t.Helper()
	c := dbassert.Counts(t, b.pool)
	return identityCounts{occurrences: c.Occurrences, contents: c.Contents, documents: c.SearchDocuments, served: c.Served}
}

// TestCyrusCopyToASecondFolderIsStoredOnce: Cyrus offers OBJECTID, and a
// message another client copies to a second configured folder keeps its
// EMAILID there, so it is one stored email — one raw MIME, one search
// document — with an occurrence in each folder, and the second folder's
// pass fetches none of its content. When it leaves one folder it is still
// served from the other; when it leaves both it is not.
func TestCyrusCopyToASecondFolderIsStoredOnce(t *testing.T) {
	t.Parallel()
	for _, disposition := range []string{"RetainTombstone", "EraseLocalCopy"} {
		t.Run(disposition, func(t *testing.T) {
			t.Parallel()
			b, u := setupCyrusSync(t, cyrus.Shared(t))
			b.env["MAILFATHOM_ACCOUNTS_0_REMOTELY_DELETED_EMAIL_DISPOSITION"] = disposition
			b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
			b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
			b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "filed"
			b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "Filed"
			u.CreateFolder("Filed")
			var raws [][]byte
			for i := range 3 {
				raws = append(raws, mailgen.Message(52, i, 4000))
			}
			uids := appendAll(u, "INBOX", raws)
			c := u.Dial()
			_, err := c.Select("INBOX", nil).Wait()
			require.NoError(t, err)
			copied, err := c.Copy(imap.UIDSetNum(uids[0]), "Filed").Wait()
			require.NoError(t, err)
			require.NoError(t, c.Logout().Wait())
			filed, _ := copied.DestUIDs.Nums()

			b.start(t)
			b.waitIdle(t)
			require.Equal(t, identityCounts{occurrences: 4, contents: 3, documents: 3, served: 3}, b.identityCounts(t))
			// Whichever folder's pass stored the message first, the other
			// recorded its occurrence of it without asking for content.
			out := map[string]map[string]any{"inbox": b.lastPassOutput(t, "INBOX"), "filed": b.lastPassOutput(t, "FILED")}
			shared := 0
			for _, o := range out {
				if n, ok := o["shared"].(float64); ok {
					shared += int(n)
				}
			}
			require.Equal(t, 1, shared, "%v", out)
			t.Logf("content bytes asked for: INBOX %v, Filed %v (the messages: %d, %d, %d bytes)",
				out["inbox"]["requested_bytes"], out["filed"]["requested_bytes"], len(raws[0]), len(raws[1]), len(raws[2]))
			require.Less(t, out["inbox"]["requested_bytes"].(float64)+out["filed"]["requested_bytes"].(float64),
				float64(len(raws[0])+len(raws[1])+len(raws[2])+len(raws[0])), "the copy's content was not fetched twice")

			// It leaves INBOX and stays in Filed: still served, still one.
			u.Expunge("INBOX", uids[0])
			b.runAgain(t)
			b.runAgain(t)
			got := b.identityCounts(t)
			require.Equal(t, 3, got.served, "served while an occurrence lives")
			require.Equal(t, 3, got.contents)
			require.Equal(t, 3, got.documents)

			// It leaves Filed too: no longer served.
			u.Expunge("Filed", imap.UID(filed[0]))
			b.runAgain(t)
			b.runAgain(t)
			got = b.identityCounts(t)
			require.Equal(t, 2, got.served)
			if disposition == "EraseLocalCopy" {
				require.Equal(t, identityCounts{occurrences: 2, contents: 2, documents: 2, served: 2}, got)
			} else {
				require.Equal(t, 4, got.occurrences, "tombstones are kept")
			}
			assertUnseenOnCyrus(t, u, "INBOX")
		})
	}
}

// TestCyrusMessageServedAgainIsEmbedded: a message that left its only
// configured folder is stored but not served, so no walk of the embedding
// backfill offers it; when another client files it in a second configured
// folder, its occurrence there serves it again, and the pass offers it as
// if it were new mail.
func TestCyrusMessageServedAgainIsEmbedded(t *testing.T) {
	t.Parallel()
	b, u := setupCyrusSync(t, cyrus.Shared(t))
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_ALIAS"] = "inbox"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_0_REMOTE_PATH"] = "INBOX"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_ALIAS"] = "filed"
	b.env["MAILFATHOM_ACCOUNTS_0_FOLDERS_1_REMOTE_PATH"] = "Filed"
	u.CreateFolder("Filed")
	u.CreateFolder("Kept") // not configured: the copy that keeps the message's EMAILID
	uids := appendAll(u, "INBOX", [][]byte{mailgen.Message(53, 0, 3000)})
	copyTo := func(from string, uid imap.UID, to string) {
		c := u.Dial()
		_, err := c.Select(from, nil).Wait()
		require.NoError(t, err)
		_, err = c.Copy(imap.UIDSetNum(uid), to).Wait()
		require.NoError(t, err)
		require.NoError(t, c.Logout().Wait())
	}
	copyTo("INBOX", uids[0], "Kept")

	// Stored without a profile; then it leaves INBOX.
	srv := withEmbedding(t, b, "test-model", 1)
	profile := b.embedding
	b.embedding = config.Embedding{}
	b.start(t)
	b.waitIdle(t)
	require.Equal(t, 1, b.identityCounts(t).served)
	u.Expunge("INBOX", uids[0])
	b.runAgain(t)
	b.runAgain(t)
	require.Zero(t, b.identityCounts(t).served)

	// With the profile, the walk has nothing served to offer.
	b.embedding = profile
	b.start(t)
	b.waitIdle(t)
	require.Zero(t, b.vectorCount(t), "a message no longer served is not embedded")

	// Filed in a configured folder, it is served again, and embedded.
	var kept imap.UID
	c := u.Dial()
	_, err := c.Select("Kept", nil).Wait()
	require.NoError(t, err)
	found, err := c.UIDSearch(&imap.SearchCriteria{}, nil).Wait()
	require.NoError(t, err)
	require.NoError(t, c.Logout().Wait())
	all := found.AllUIDs()
	require.Len(t, all, 1)
	kept = all[0]
	copyTo("Kept", kept, "Filed")
	b.runAgain(t)
	require.Equal(t, identityCounts{occurrences: 2, contents: 1, documents: 1, served: 1}, b.identityCounts(t))
	require.Equal(t, 1.0, b.lastPassOutput(t, "FILED")["shared"], "stored once, as an occurrence of the email held")
	require.Zero(t, dbassert.PassagesWithoutVectors(t, b.pool), "the message served again has its vectors")
	require.Positive(t, srv.Inputs())
}
