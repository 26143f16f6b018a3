package workers_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/riverqueue/river/rivertype"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

const quotedReply = "From: Alice <alice@example.test>\r\n" +
	"To: Bob <bob@example.test>\r\n" +
	"Subject: Platypus sightings\r\n" +
	"Message-ID: <reply-1@example.test>\r\n" +
	"Date: Mon, 02 Jun 2025 10:00:00 +0000\r\n" +
	"MIME-Version: 1.0\r\n" +
	"Content-Type: multipart/mixed; boundary=b1\r\n\r\n" +
	"--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
	"I counted eleven wombats near the river.\r\n\r\n" +
	"On Sun, 1 Jun 2025, Bob wrote:\r\n> Did anyone see the zeppelin?\r\n> It was huge.\r\n" +
	"--b1\r\nContent-Type: text/plain; name=notes.txt\r\nContent-Disposition: attachment; filename=notes.txt\r\n\r\n" +
	"xylophone inventory\r\n" +
	"--b1--\r\n"

func TestExtractionAndSearch(t *testing.T) {
	t.Parallel()

	t.Run("SyncedMailIsFoundByBodySubjectAndParticipant", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.user.Append("INBOX", []byte(quotedReply), time.Now())
		b.user.Append("INBOX", mailgen.Message(12, 1, 3000), time.Now())
		b.start(t)
		b.waitIdle(t)

		search := func(text string) []searchindex.Hit {
			hits, err := searchindex.Search(context.Background(), b.pool, searchindex.Query{
				Text: text, Accounts: []string{"primary"}, Configuration: "simple"})
			require.NoError(t, err)
			return hits
		}
		require.Len(t, search("wombats"), 1, "body words")
		require.Len(t, search("platypus"), 1, "subject words")
		require.Len(t, search("alice@example.test"), 1, "participant address")
		require.Empty(t, search("zeppelin"), "words only in trimmed quoted history")
		require.Empty(t, search("xylophone"), "words only inside an attachment")

		reply := b.storedMessage(t, "reply-1@example.test")
		require.Equal(t, 1, reply.AttachmentCount)
		require.NotNil(t, reply.MIMEReadable)
		require.True(t, *reply.MIMEReadable)
	})

	t.Run("BackfillCompletesOlderMessagesThenStops", func(t *testing.T) {
		t.Parallel()
		b := setupSync(t)
		b.env["MAILFATHOM_SYNC_ENABLED"] = "false"
		b.env["MAILFATHOM_BACKFILL_BATCH_SIZE"] = "3"
		b.env["MAILFATHOM_BACKFILL_MAX_BATCHES_PER_RUN"] = "2"
		b.env["MAILFATHOM_BACKFILL_INTERVAL"] = "1h"
		ctx := context.Background()

		ids := b.storeUnextracted(t, 10, func(i int) []byte {
			if i == 4 {
				return []byte("Content-Type: multipart/mixed\r\n\r\nno boundary, so no reader can parse this\r\n")
			}
			return mailgen.Message(13, i, 2000)
		})
		documents := func() int { return dbassert.Counts(t, b.pool).SearchDocuments }

		// One run: two batches of three, then it yields for the interval.
		b.start(t)
		b.waitIdle(t)
		require.Equal(t, 6, documents())
		var position uuid.UUID
		require.NoError(t, pgx.BeginFunc(ctx, b.pool, func(tx pgx.Tx) (err error) {
			position, err = searchindex.BackfillPosition(ctx, tx)
			return err
		}))
		require.Equal(t, ids[5], position)

		// A restart (as after a crash) resumes from the committed position.
		b.start(t)
		dbassert.MakeJobsDue(t, b.pool, "extraction_backfill", rivertype.JobStateScheduled)
		b.waitIdle(t)
		require.Equal(t, 10, documents())
		unreadable := 0
		for _, o := range dbassert.Occurrences(t, b.pool, "") {
			if o.MIMEReadable != nil && !*o.MIMEReadable && o.MIMEFailure == "Unparseable" {
				unreadable++
			}
		}
		require.Equal(t, 1, unreadable, "an unreadable message is stepped over, not retried forever")

		// Nothing is left: the last batch found no work and ended the walk.
		poll.Until(t, 10*time.Second, "no extraction backfill step is left", func() (bool, string) {
			pending := dbassert.JobCount(t, b.pool, "extraction_backfill", rivertype.JobStateAvailable,
				rivertype.JobStateScheduled, rivertype.JobStateRetryable, rivertype.JobStateRunning)
			return pending == 0, fmt.Sprintf("%d steps coming", pending)
		})
	})
}

// storedMessage returns the stored occurrence of the message whose
// Message-ID is messageID.
func (b *syncBundle) storedMessage(t *testing.T, messageID string) dbassert.Occurrence {
	t.Helper()
	for _, o := range dbassert.Occurrences(t, b.pool, "") {
		if o.MessageID == messageID {
			return o
		}
	}
	require.Failf(t, "not stored", "no message %s", messageID)
	return dbassert.Occurrence{}
}

// storeUnextracted stores n messages in primary's INBOX the way a version
// without extraction stored them: content, no metadata, no search
// document, no passages. It returns their ids in order.
func (b *syncBundle) storeUnextracted(t *testing.T, n int, raw func(i int) []byte) []uuid.UUID {
	t.Helper()
	ctx := context.Background()
	accountID, err := mailstore.EnsureAccount(ctx, b.pool, "primary")
	require.NoError(t, err)
	tx, err := b.pool.Begin(ctx)
	require.NoError(t, err)
	binding, _, _, err := mailstore.CommitBinding(ctx, tx, accountID, "INBOX", "INBOX", "/")
	require.NoError(t, err)
	require.NoError(t, tx.Commit(ctx))
	ids := make([]uuid.UUID, n)
	for i := range n {
		m := raw(i)
		ids[i], err = mailstore.UpsertOccurrence(ctx, b.pool, mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID,
			UIDValidity: 1, UID: uint32(i + 1), Size: int64(len(m)), Raw: m, Availability: mailstore.Available})
		require.NoError(t, err)
	}
	return ids
}
