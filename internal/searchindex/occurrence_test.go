package searchindex_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/internal/searchindex"
	"github.com/mailfathom/mailfathom/internal/testharness/dbtest"
)

func TestWriteOccurrence(t *testing.T) {
	t.Parallel()
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

	occurrence := func(uid uint32, raw string) mailstore.Occurrence {
		o := mailstore.Occurrence{AccountID: accountID, FolderID: binding.ID, UIDValidity: 1, UID: uid,
			Size: 10, Subject: "Envelope subject", MessageID: "<envelope@x>", Availability: mailstore.ExceededSizeLimit}
		if raw != "" {
			o.Availability, o.Raw = mailstore.Available, []byte(raw)
		}
		return o
	}
	write := func(o mailstore.Occurrence, rec *searchindex.Record) {
		t.Helper()
		tx, err := pool.Begin(ctx)
		require.NoError(t, err)
		_, err = searchindex.WriteOccurrence(ctx, tx, o, rec)
		require.NoError(t, err)
		require.NoError(t, tx.Commit(ctx))
	}
	type row struct {
		subject, messageID string
		readable           *bool
		failure            *string
		attachments        int
		participants       int
		attachmentRows     int
		source             string
	}
	read := func(uid uint32) row {
		t.Helper()
		var r row
		require.NoError(t, pool.QueryRow(ctx, `
			SELECT e.subject, e.message_id, e.mime_readable, e.mime_failure, e.attachment_count,
			       (SELECT count(*) FROM email_participants p WHERE p.stored_email_id = e.id),
			       (SELECT count(*) FROM email_attachments a WHERE a.stored_email_id = e.id),
			       coalesce((SELECT d.text_source FROM email_search_documents d WHERE d.stored_email_id = e.id), '')
			FROM stored_emails e WHERE e.mail_folder_id = $1 AND e.uid = $2`, binding.ID, uid).
			Scan(&r.subject, &r.messageID, &r.readable, &r.failure, &r.attachments, &r.participants, &r.attachmentRows, &r.source))
		return r
	}
	readable := func(subject string, participants, attachments int) *searchindex.Record {
		rec := &searchindex.Record{Readable: true, Subject: subject, TextSource: searchindex.SourcePlainText, Text: "body of " + subject,
			AttachmentCount: attachments}
		for range participants {
			rec.Participants = append(rec.Participants, searchindex.Participant{Role: "To", Address: "a@x", Comparison: "A@X"})
		}
		for range attachments {
			rec.Attachments = append(rec.Attachments, searchindex.Attachment{MediaType: "application/pdf", DecodedBytes: 4})
		}
		return rec
	}

	// A first readable write stores the MIME values and the details once.
	rec := readable("MIME subject", 3, 2)
	write(occurrence(1, "raw one"), rec)
	require.NotZero(t, rec.StoredEmailID)
	r := read(1)
	require.Equal(t, "MIME subject", r.subject)
	require.Equal(t, "<envelope@x>", r.messageID, "the envelope's value where MIME has none")
	require.True(t, *r.readable)
	require.Equal(t, 2, r.attachments)
	require.Equal(t, 3, r.participants)
	require.Equal(t, 2, r.attachmentRows)
	require.Equal(t, searchindex.SourcePlainText, r.source)

	// Writing it again replaces the earlier extraction's details.
	write(occurrence(1, "raw two"), readable("Second subject", 1, 0))
	r = read(1)
	require.Equal(t, "Second subject", r.subject)
	require.Equal(t, 1, r.participants)
	require.Equal(t, 0, r.attachmentRows)
	require.Equal(t, 0, r.attachments)

	// An unreadable write never downgrades a readable one, nor its document.
	write(occurrence(1, "raw three"), &searchindex.Record{Failure: "Unparseable"})
	r = read(1)
	require.True(t, *r.readable)
	require.Nil(t, r.failure)
	require.Equal(t, 1, r.participants)
	require.Equal(t, searchindex.SourcePlainText, r.source)

	// An unreadable first write records the failure and an envelope document.
	write(occurrence(2, "raw"), &searchindex.Record{Failure: "Unparseable"})
	r = read(2)
	require.False(t, *r.readable)
	require.Equal(t, "Unparseable", *r.failure)
	require.Equal(t, "Envelope subject", r.subject)
	require.Equal(t, searchindex.SourceNotExtracted, r.source)

	// An oversized occurrence gets an envelope document; a later readable
	// write overwrites it, and a later oversized report keeps the content.
	write(occurrence(3, ""), nil)
	r = read(3)
	require.Nil(t, r.readable)
	require.Equal(t, searchindex.SourceNotExtracted, r.source)
	write(occurrence(3, "now fetched"), readable("Fetched", 2, 1))
	write(occurrence(3, ""), nil)
	r = read(3)
	require.True(t, *r.readable)
	require.Equal(t, searchindex.SourcePlainText, r.source)
	require.Equal(t, 2, r.participants)
	content, ok, err := mailstore.ReadOccurrence(ctx, pool, binding.ID, 1, 3)
	require.NoError(t, err)
	require.True(t, ok)
	require.Equal(t, mailstore.Available, content.Availability)
	require.NotNil(t, content.ContentLength)

	// The untrimmed reading is stored only when trimming removed something;
	// coalesce(body_text_untrimmed, body_text) reads it either way.
	untrimmed := func(uid uint32) (stored *string, reading string) {
		t.Helper()
		require.NoError(t, pool.QueryRow(ctx, `
			SELECT d.body_text_untrimmed, coalesce(d.body_text_untrimmed, d.body_text)
			FROM email_search_documents d JOIN stored_emails e ON e.id = d.stored_email_id
			WHERE e.mail_folder_id = $1 AND e.uid = $2`, binding.ID, uid).Scan(&stored, &reading))
		return stored, reading
	}
	rec = readable("Reply", 1, 0)
	rec.Text, rec.Untrimmed = "Thanks!", "Thanks!\n\nOn Monday Ann wrote:\n> Lunch?"
	write(occurrence(5, "raw"), rec)
	stored, reading := untrimmed(5)
	require.NotNil(t, stored)
	require.Equal(t, rec.Untrimmed, reading)
	rec.Untrimmed = rec.Text // rewritten with nothing to trim: the copy goes
	write(occurrence(5, "raw"), rec)
	stored, reading = untrimmed(5)
	require.Nil(t, stored)
	require.Equal(t, "Thanks!", reading)

	// Every document carries its stored email's sending date and folder.
	var documents, differing int
	require.NoError(t, pool.QueryRow(ctx, `
		SELECT count(*), count(*) FILTER (WHERE d.sent_at IS DISTINCT FROM e.sent_at OR d.mail_folder_id IS DISTINCT FROM e.mail_folder_id)
		FROM email_search_documents d JOIN stored_emails e ON e.id = d.stored_email_id`).Scan(&documents, &differing))
	require.NotZero(t, documents)
	require.Zero(t, differing)

	// A folder of another account is refused.
	tx, err = pool.Begin(ctx)
	require.NoError(t, err)
	o := occurrence(4, "raw")
	o.AccountID = accountID + 1000
	_, err = searchindex.WriteOccurrence(ctx, tx, o, readable("x", 0, 0))
	require.ErrorIs(t, err, mailstore.ErrForeignFolder)
	require.NoError(t, tx.Rollback(ctx))
}
