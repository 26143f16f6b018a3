package searchindex_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

func TestSearchIndex(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		pool      *pgxpool.Pool
		accountID int64
		binding   mailstore.Binding
	}

	setup := func(t *testing.T) (context.Context, *testBundle) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		b, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return ctx, &testBundle{pool: pool, accountID: accountID, binding: b}
	}

	store := func(ctx context.Context, t *testing.T, b *testBundle, uid uint32, subject string, availability mailstore.Availability) uuid.UUID {
		t.Helper()
		o := mailstore.Occurrence{AccountID: b.accountID, FolderID: b.binding.ID, UIDValidity: 1, UID: uid,
			Size: 10, Subject: subject, Availability: availability, InternalDate: time.Now()}
		if availability == mailstore.Available {
			o.Raw = []byte("Subject: " + subject + "\r\n\r\nbody\r\n")
		}
		id, err := mailstore.UpsertOccurrence(ctx, b.pool, o)
		require.NoError(t, err)
		return id
	}

	search := func(ctx context.Context, t *testing.T, b *testBundle, text string) []searchindex.Hit {
		t.Helper()
		hits, err := searchindex.Search(ctx, b.pool, searchindex.Query{Text: text, Accounts: []string{"primary"}, Configuration: "simple"})
		require.NoError(t, err)
		return hits
	}

	t.Run("FindsBodySubjectAndParticipantsNotUntrimmedText", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := store(ctx, t, b, 1, "Quarterly budget", mailstore.Available)
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{
			StoredEmailID: id, Readable: true, Subject: "Quarterly budget",
			Participants: []searchindex.Participant{{Role: "From", Address: "Alice@Example.test", Comparison: "ALICE@EXAMPLE.TEST", DisplayName: "Alice"}},
			TextSource:   searchindex.SourcePlainText,
			Text:         "the numbers look fine",
			Untrimmed:    "the numbers look fine\n> older quoted zeppelin",
		}))
		require.Len(t, search(ctx, t, b, "numbers"), 1)
		require.Len(t, search(ctx, t, b, "quarterly"), 1)
		require.Len(t, search(ctx, t, b, "alice@example.test"), 1)
		require.Empty(t, search(ctx, t, b, "zeppelin"), "trimmed quoted history is not indexed")
		hits := search(ctx, t, b, "budget")
		require.Equal(t, "Alice@Example.test", hits[0].From)

		// A removed account's mail is not served.
		hits, err := searchindex.Search(ctx, b.pool, searchindex.Query{Text: "budget", Accounts: []string{"someone-else"}, Configuration: "simple"})
		require.NoError(t, err)
		require.Empty(t, hits)
	})

	t.Run("TheREADMEQueryFindsWhatSearchFinds", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		readme, err := os.ReadFile("../../README.md")
		require.NoError(t, err)
		// The psql example: the sql block that searches for 'budget review'.
		var query string
		for _, block := range strings.Split(string(readme), "```sql\n")[1:] {
			block, _, _ = strings.Cut(block, "```")
			if strings.Contains(block, "'budget review'") {
				query = block
			}
		}
		require.NotEmpty(t, query, "README.md has the search example")
		id := store(ctx, t, b, 5, "Budget review", mailstore.Available)
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{StoredEmailID: id, Readable: true,
			Subject: "Budget review", TextSource: searchindex.SourcePlainText, Text: "the budget review is on Friday"}))
		other := store(ctx, t, b, 6, "Lunch", mailstore.Available)
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{StoredEmailID: other, Readable: true,
			Subject: "Lunch", TextSource: searchindex.SourcePlainText, Text: "sandwiches"}))

		rows, err := b.pool.Query(ctx, query)
		require.NoError(t, err)
		var subjects []string
		for rows.Next() {
			values, err := rows.Values()
			require.NoError(t, err)
			subjects = append(subjects, fmt.Sprint(values[len(values)-1]))
		}
		require.NoError(t, rows.Err())
		require.Equal(t, []string{"Budget review"}, subjects)
		require.Len(t, search(ctx, t, b, "budget review"), 1)
	})

	t.Run("EnvelopeDocumentNeverOverwritesARead", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		big := store(ctx, t, b, 2, "Huge scan attached", mailstore.ExceededSizeLimit)
		require.NoError(t, searchindex.InsertEnvelopeDocument(ctx, b.pool, big))
		require.Len(t, search(ctx, t, b, "scan"), 1)

		id := store(ctx, t, b, 3, "Read once", mailstore.Available)
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{StoredEmailID: id, Readable: true,
			Subject: "Read once", TextSource: searchindex.SourcePlainText, Text: "marmalade"}))
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{StoredEmailID: id, Readable: false, Failure: "Unparseable"}))
		require.Len(t, search(ctx, t, b, "marmalade"), 1, "the body a readable run wrote is kept")
	})

	t.Run("DocumentsCarryTheSendingDateAndFolder", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		big := store(ctx, t, b, 2, "Huge scan attached", mailstore.ExceededSizeLimit)
		require.NoError(t, searchindex.InsertEnvelopeDocument(ctx, b.pool, big))
		id := store(ctx, t, b, 3, "Read once", mailstore.Available)
		sent := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{StoredEmailID: id, Readable: true, SentAt: &sent,
			Subject: "Read once", TextSource: searchindex.SourcePlainText, Text: "marmalade"}))
		copies := func() (n, differing int) {
			t.Helper()
			require.NoError(t, b.pool.QueryRow(ctx, `
				SELECT count(*), count(*) FILTER (WHERE d.sent_at IS DISTINCT FROM e.sent_at OR d.mail_folder_id IS DISTINCT FROM e.mail_folder_id)
				FROM email_search_documents d JOIN stored_emails e ON e.id = d.stored_email_id`).Scan(&n, &differing))
			return n, differing
		}
		n, differing := copies()
		require.Equal(t, 2, n)
		require.Zero(t, differing)
		var copied time.Time
		require.NoError(t, b.pool.QueryRow(ctx, `SELECT sent_at FROM email_search_documents WHERE stored_email_id = $1`, id).Scan(&copied))
		require.True(t, sent.Equal(copied))

		// A date written to the stored email later is copied too.
		later := sent.Add(time.Hour)
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{StoredEmailID: big, Readable: true, SentAt: &later,
			Subject: "Huge scan attached", TextSource: searchindex.SourcePlainText, Text: "scan"}))
		_, err := b.pool.Exec(ctx, `UPDATE stored_emails SET sent_at = NULL WHERE id = $1`, id)
		require.NoError(t, err)
		n, differing = copies()
		require.Equal(t, 2, n)
		require.Zero(t, differing)
	})

	t.Run("StartupGateAndRebuild", func(t *testing.T) {
		t.Parallel()
		ctx, b := setup(t)
		id := store(ctx, t, b, 4, "Running shoes", mailstore.Available)
		require.NoError(t, searchindex.Write(ctx, b.pool, searchindex.Record{StoredEmailID: id, Readable: true,
			Subject: "Running shoes", TextSource: searchindex.SourcePlainText, Text: "we were running"}))

		compiled, err := searchindex.CompiledConfiguration(ctx, b.pool)
		require.NoError(t, err)
		require.Equal(t, "simple", compiled)
		require.NoError(t, searchindex.CheckConfiguration(ctx, b.pool, "simple"))
		err = searchindex.CheckConfiguration(ctx, b.pool, "english")
		var mismatch *searchindex.ConfigurationMismatchError
		require.ErrorAs(t, err, &mismatch)
		require.Contains(t, err.Error(), `"english"`)
		require.Contains(t, err.Error(), `"simple"`)
		require.Contains(t, err.Error(), "mailfathom reindex-search")

		require.NoError(t, searchindex.Rebuild(ctx, b.pool, "english"))
		require.NoError(t, searchindex.CheckConfiguration(ctx, b.pool, "english"))
		hits, err := searchindex.Search(ctx, b.pool, searchindex.Query{Text: "run", Accounts: []string{"primary"}, Configuration: "english"})
		require.NoError(t, err)
		require.Len(t, hits, 1, "english stems running to run")
		require.Error(t, searchindex.Rebuild(ctx, b.pool, "klingon"))
	})
}
