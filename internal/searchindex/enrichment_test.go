package searchindex_test

import (
	"context"
	"fmt"
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

// TestEnrichment writes the same occurrences through one shared
// Enrichment and one by one, into two folders, and requires the same rows.
func TestEnrichment(t *testing.T) {
	t.Parallel()

	type testBundle struct {
		ctx      context.Context
		pool     *pgxpool.Pool
		account  int64
		shared   mailstore.Binding
		separate mailstore.Binding
	}
	setup := func(t *testing.T) *testBundle {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		t.Cleanup(cancel)
		pool := dbtest.Pool(t)
		accountID, err := mailstore.EnsureAccount(ctx, pool, "primary")
		require.NoError(t, err)
		b := &testBundle{ctx: ctx, pool: pool, account: accountID}
		for i, binding := range []*mailstore.Binding{&b.shared, &b.separate} {
			tx, err := pool.Begin(ctx)
			require.NoError(t, err)
			alias := fmt.Sprintf("F%d", i)
			*binding, _, _, err = mailstore.CommitBinding(ctx, tx, accountID, alias, alias, "/")
			require.NoError(t, err)
			require.NoError(t, tx.Commit(ctx))
		}
		return b
	}
	message := func(subject, body string) string {
		return "From: Ann <ann@example.org>\r\nTo: bob@example.org, Cy <cy@example.org>\r\nSubject: " + subject +
			"\r\nMIME-Version: 1.0\r\nContent-Type: multipart/mixed; boundary=b\r\n\r\n--b\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
			strings.ReplaceAll(body, "\n", "\r\n") +
			"\r\n--b\r\nContent-Type: application/pdf\r\nContent-Disposition: attachment; filename=plan.pdf\r\nContent-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b--\r\n"
	}
	// corpus is four occurrences of binding: two readable, one unreadable,
	// one over the size limit.
	corpus := func(b *testBundle, binding mailstore.Binding, firstSubject string) ([]mailstore.Occurrence, []*searchindex.Record) {
		raws := []string{
			message(firstSubject, "Shall we meet at noon?\n\n"+strings.Repeat("Bring the plans for the harbour. ", 60)),
			message("Second", "Short."),
			"unreadable",
			"",
		}
		var os []mailstore.Occurrence
		var recs []*searchindex.Record
		for i, raw := range raws {
			o := mailstore.Occurrence{AccountID: b.account, FolderID: binding.ID, UIDValidity: 7, UID: uint32(i + 1),
				Size: 10, Subject: fmt.Sprintf("Envelope %d", i), Availability: mailstore.ExceededSizeLimit}
			var rec *searchindex.Record
			switch {
			case raw == "unreadable":
				o.Availability, o.Raw = mailstore.Available, []byte(raw)
				rec = &searchindex.Record{Failure: "Unparseable"}
			case raw != "":
				o.Availability, o.Raw = mailstore.Available, []byte(raw)
				r := searchindex.Extract(uuid.Nil, o.Raw, mimex.DefaultLimits())
				require.True(t, r.Readable)
				rec = &r
			}
			os, recs = append(os, o), append(recs, rec)
		}
		return os, recs
	}
	writeShared := func(t *testing.T, b *testBundle, os []mailstore.Occurrence, recs []*searchindex.Record) {
		t.Helper()
		tx, err := b.pool.Begin(b.ctx)
		require.NoError(t, err)
		var e searchindex.Enrichment
		for i, o := range os {
			p, err := searchindex.SendOccurrence(b.ctx, tx, o, recs[i], &e, 3)
			require.NoError(t, err)
			_, err = p.Wait()
			require.NoError(t, err)
		}
		require.Equal(t, 1, e.Len(), "the first three were written with the third")
		require.NoError(t, searchindex.SendEnrichment(b.ctx, tx, &e).Wait())
		require.Zero(t, e.Len())
		require.NoError(t, tx.Commit(b.ctx))
	}
	writeSeparately := func(t *testing.T, b *testBundle, os []mailstore.Occurrence, recs []*searchindex.Record) {
		t.Helper()
		for i, o := range os {
			tx, err := b.pool.Begin(b.ctx)
			require.NoError(t, err)
			_, err = searchindex.WriteOccurrence(b.ctx, tx, o, recs[i])
			require.NoError(t, err)
			require.NoError(t, tx.Commit(b.ctx))
		}
	}
	// rows describes every extraction row of binding's occurrences by UID.
	rows := func(t *testing.T, b *testBundle, binding mailstore.Binding) []string {
		t.Helper()
		r, err := b.pool.Query(b.ctx, `
			SELECT e.uid || ' doc ' || coalesce((SELECT format('%s %s %s %s|%s|%s|%s', d.text_source, d.lossy, d.truncated, d.subject, d.participants, d.body_text, d.body_text_untrimmed)
			                FROM email_search_documents d WHERE d.stored_email_id = e.id), '-')
			    || ' participants ' || coalesce((SELECT string_agg(format('%s:%s:%s:%s:%s', p.position, p.role, p.address, p.comparison, p.display_name), ',' ORDER BY p.position)
			                FROM email_participants p WHERE p.stored_email_id = e.id), '-')
			    || ' attachments ' || coalesce((SELECT string_agg(format('%s:%s:%s:%s:%s', a.position, a.media_type, a.disposition, a.file_name, a.decoded_bytes), ',' ORDER BY a.position)
			                FROM email_attachments a WHERE a.stored_email_id = e.id), '-')
			    || ' passages ' || coalesce((SELECT string_agg(format('%s:%s', p.ordinal, p.text), ',' ORDER BY p.ordinal)
			                FROM email_passages p WHERE p.stored_email_id = e.id), '-')
			FROM stored_emails e WHERE e.mail_folder_id = $1 ORDER BY e.uid`, binding.ID)
		require.NoError(t, err)
		var out []string
		for r.Next() {
			var s string
			require.NoError(t, r.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, r.Err())
		return out
	}
	passageXmins := func(t *testing.T, b *testBundle, binding mailstore.Binding, uid uint32) []string {
		t.Helper()
		r, err := b.pool.Query(b.ctx, `SELECT p.xmin::text FROM email_passages p JOIN stored_emails e ON e.id = p.stored_email_id
			WHERE e.mail_folder_id = $1 AND e.uid = $2 ORDER BY p.ordinal`, binding.ID, uid)
		require.NoError(t, err)
		var out []string
		for r.Next() {
			var s string
			require.NoError(t, r.Scan(&s))
			out = append(out, s)
		}
		require.NoError(t, r.Err())
		return out
	}

	t.Run("WritesWhatOneByOneWrites", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		os, recs := corpus(b, b.shared, "First")
		writeShared(t, b, os, recs)
		os, recs = corpus(b, b.separate, "First")
		writeSeparately(t, b, os, recs)
		shared := rows(t, b, b.shared)
		require.Len(t, shared, 4)
		require.Contains(t, shared[0], "participants 0:From:ann@example.org")
		require.Contains(t, shared[0], "attachments 0:application/pdf:attachment:plan.pdf")
		require.Contains(t, shared[2], "doc NotExtracted")
		require.Contains(t, shared[3], "passages 0:Envelope 3")
		require.Equal(t, rows(t, b, b.separate), shared)
	})

	t.Run("ARewriteKeepsUnchangedPassagesAndReplacesTheRest", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		os, recs := corpus(b, b.shared, "First")
		writeShared(t, b, os, recs)
		before := passageXmins(t, b, b.shared, 1)
		require.Greater(t, len(before), 2)
		unchanged := passageXmins(t, b, b.shared, 2)

		os, recs = corpus(b, b.shared, "Changed")
		writeShared(t, b, os, recs)
		after := passageXmins(t, b, b.shared, 1)
		require.NotEqual(t, before[0], after[0], "the changed subject's passage is replaced")
		require.Equal(t, before[1:], after[1:], "the unchanged body passages are kept")
		require.Equal(t, unchanged, passageXmins(t, b, b.shared, 2), "an unchanged message keeps its passages")

		os, recs = corpus(b, b.separate, "Changed")
		writeSeparately(t, b, os, recs)
		require.Equal(t, rows(t, b, b.separate), rows(t, b, b.shared))
	})

	t.Run("RefusesAnotherFolder", func(t *testing.T) {
		t.Parallel()
		b := setup(t)
		var e searchindex.Enrichment
		first, _ := corpus(b, b.shared, "First")
		other, _ := corpus(b, b.separate, "First")
		require.NoError(t, e.Add(first[3], nil))
		require.Error(t, e.Add(other[3], nil))
	})
}
