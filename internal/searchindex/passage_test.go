package searchindex_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
	"github.com/mailfathom/mailfathom/mimex"
)

func TestPassages(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		ctx     context.Context
		pool    *pgxpool.Pool
		binding mailstore.Binding
		account int64
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
		return &testBundle{ctx: ctx, pool: pool, binding: binding, account: accountID}
	}
	occurrence := func(b *testBundle, uid uint32, raw string) mailstore.Occurrence {
		o := mailstore.Occurrence{AccountID: b.account, FolderID: b.binding.ID, UIDValidity: 1, UID: uid,
			Size: 10, Subject: "Envelope  subject", Availability: mailstore.ExceededSizeLimit}
		if raw != "" {
			o.Availability, o.Raw = mailstore.Available, []byte(raw)
		}
		return o
	}
	write := func(t *testing.T, b *testBundle, o mailstore.Occurrence) uuid.UUID {
		t.Helper()
		var rec *searchindex.Record
		if o.Raw != nil {
			r := searchindex.Extract(uuid.Nil, o.Raw, mimex.DefaultLimits())
			rec = &r
		}
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		id, err := searchindex.WriteOccurrence(b.ctx, tx, o, rec)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(b.ctx))
		return id
	}
	passages := func(t *testing.T, b *testBundle, id uuid.UUID) []searchindex.Passage {
		t.Helper()
		ps, err := searchindex.PassagesOf(b.ctx, b.pool, id)
		require.NoError(t, err)
		return ps
	}
	message := func(subject, body string) string {
		return "From: a@example.org\r\nSubject: " + subject + "\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
			strings.ReplaceAll(body, "\n", "\r\n")
	}

	t.Run("DerivedOnTheSameReadAndStoredWithTheMessage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		long := strings.Repeat("The harbour crane was inspected on Monday. ", 40)
		id := write(t, b, occurrence(b, 1, message("Crane inspection", "Short opening.\n\n"+long)))
		ps := passages(t, b, id)
		require.GreaterOrEqual(t, len(ps), 3)
		require.Equal(t, searchindex.Passage{Ordinal: searchindex.SubjectOrdinal, Text: "Crane inspection"}, ps[0])
		require.True(t, strings.HasPrefix(ps[1].Text, "Short opening."))
		for i, p := range ps {
			require.Equal(t, int16(i), p.Ordinal)
			require.LessOrEqual(t, len([]rune(p.Text)), mimex.MaxPassageChars)
		}
	})

	t.Run("AnUnchangedRewriteKeepsTheRowsAndAChangedOneReplacesThem", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := write(t, b, occurrence(b, 1, message("Lunch", "Shall we meet at noon?\n\nBring the plans.")))
		xmins := func() []string {
			var out []string
			rows, err := b.pool.Query(b.ctx, `SELECT xmin::text FROM email_passages WHERE stored_email_id = $1 ORDER BY ordinal`, id)
			require.NoError(t, err)
			for rows.Next() {
				var x string
				require.NoError(t, rows.Scan(&x))
				out = append(out, x)
			}
			require.NoError(t, rows.Err())
			return out
		}
		before := xmins()
		require.Len(t, before, 2)
		write(t, b, occurrence(b, 1, message("Lunch", "Shall we meet at noon?\n\nBring the plans.")))
		require.Equal(t, before, xmins(), "an idempotent rewrite must keep the passages (and their vectors)")

		write(t, b, occurrence(b, 1, message("Dinner", "Shall we meet at noon?\n\nBring the plans.")))
		require.Equal(t, "Dinner", passages(t, b, id)[0].Text)
		after := xmins()
		require.NotEqual(t, before[0], after[0])
		require.Equal(t, before[1], after[1], "the unchanged body passage is kept")

		// An unreadable rewrite keeps what a readable read derived.
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		_, err = searchindex.WriteOccurrence(b.ctx, tx, occurrence(b, 1, "x"), &searchindex.Record{Failure: "Unparseable"})
		require.NoError(t, err)
		require.NoError(t, tx.Commit(b.ctx))
		require.Len(t, passages(t, b, id), 2)
	})

	t.Run("AMessageWithoutContentGetsItsEnvelopeSubject", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := write(t, b, occurrence(b, 1, ""))
		require.Equal(t, []searchindex.Passage{{Ordinal: 0, Text: "Envelope subject"}}, passages(t, b, id))
	})

	t.Run("TheBackfillPathWritesThemToo", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := write(t, b, occurrence(b, 1, message("Old", "Stored before passages existed.")))
		_, err := b.pool.Exec(b.ctx, `DELETE FROM email_passages WHERE stored_email_id = $1`, id)
		require.NoError(t, err)
		awaiting, err := searchindex.AwaitingExtraction(b.ctx, b.pool, uuid.Nil, 10)
		require.NoError(t, err)
		require.Equal(t, []uuid.UUID{id}, awaiting, "a message without passages awaits extraction")
		rec := searchindex.Extract(id, []byte(message("Old", "Stored before passages existed.")), mimex.DefaultLimits())
		require.NoError(t, searchindex.Write(b.ctx, b.pool, rec))
		require.Len(t, passages(t, b, id), 2)
		awaiting, err = searchindex.AwaitingExtraction(b.ctx, b.pool, uuid.Nil, 10)
		require.NoError(t, err)
		require.Empty(t, awaiting)
	})

	t.Run("RemovedWithTheMessage", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		id := write(t, b, occurrence(b, 1, message("Gone", "Soon removed.")))
		require.NotEmpty(t, passages(t, b, id))
		_, err := b.pool.Exec(b.ctx, `DELETE FROM stored_emails WHERE id = $1`, id)
		require.NoError(t, err)
		require.Empty(t, passages(t, b, id))
	})
}
