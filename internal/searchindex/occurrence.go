package searchindex

import (
	"context"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/mimex"
)

// Batcher sends a batch of statements in one round trip; pgx.Tx satisfies
// it.
type Batcher interface {
	SendBatch(ctx context.Context, b *pgx.Batch) pgx.BatchResults
}

// The statements that follow the occurrence's upsert in WriteOccurrence's
// batch find its stored email by the occurrence identity ($2–$4, through
// ix_stored_emails_folder_uid; $1, the account, is implied by the folder,
// which the upsert checked, and naming it lets the planner pick the
// account's index and scan all of the account's mail), since a pipelined
// statement cannot wait for the id the upsert returns.
const (
	occurrenceIDWhere = `e.mail_folder_id = $2 AND e.uid_validity = $3 AND e.uid = $4 AND $1::bigint IS NOT NULL`

	insertOccurrenceParticipantsSQL = `
		INSERT INTO email_participants (stored_email_id, position, role, address, comparison, display_name)
		SELECT e.id, ord - 1, r, a, c, nullif(d, '')
		FROM stored_emails e,
		     unnest($5::text[], $6::text[], $7::text[], $8::text[]) WITH ORDINALITY AS t(r, a, c, d, ord)
		WHERE ` + occurrenceIDWhere

	insertOccurrenceAttachmentsSQL = `
		INSERT INTO email_attachments (stored_email_id, position, media_type, disposition, file_name, file_name_repaired, decoded_bytes, tnef_unexpanded)
		SELECT e.id, ord - 1, m, nullif(d, ''), nullif(f, ''), r, s, t
		FROM stored_emails e,
		     unnest($5::text[], $6::text[], $7::text[], $8::boolean[], $9::bigint[], $10::boolean[]) WITH ORDINALITY AS x(m, d, f, r, s, t, ord)
		WHERE ` + occurrenceIDWhere

	writeOccurrenceDocumentSQL = `
		INSERT INTO email_search_documents (stored_email_id, text_source, lossy, truncated, subject, participants, body_text, body_text_untrimmed,
		                                    sent_at, mail_folder_id)
		SELECT e.id, $5, $6, $7, nullif($8, ''), nullif($9, ''), nullif($10, ''), nullif($11, ''), e.sent_at, e.mail_folder_id
		FROM stored_emails e WHERE ` + occurrenceIDWhere + `
		ON CONFLICT (stored_email_id) DO UPDATE SET
			text_source = excluded.text_source, lossy = excluded.lossy, truncated = excluded.truncated,
			subject = excluded.subject, participants = excluded.participants,
			body_text = excluded.body_text, body_text_untrimmed = excluded.body_text_untrimmed,
			sent_at = excluded.sent_at, mail_folder_id = excluded.mail_folder_id`

	insertOccurrenceEnvelopeDocumentSQL = `
		INSERT INTO email_search_documents (stored_email_id, text_source, subject, sent_at, mail_folder_id)
		SELECT e.id, $5, left(e.subject, $6), e.sent_at, e.mail_folder_id FROM stored_emails e WHERE ` + occurrenceIDWhere + `
		ON CONFLICT (stored_email_id) DO NOTHING`
)

// SendOccurrence stores one fetched occurrence and what extraction found
// in its content in one round trip: the stored_emails row is written once,
// with the extracted metadata (mailstore.UpsertOccurrence with
// o.Extracted), followed by the record's participants, attachments,
// search document and passages. rec is nil when o carries no content (over the size
// limit); the occurrence then gets the envelope document. The behaviour is
// that of UpsertOccurrence followed by Write (or InsertEnvelopeDocument),
// and rec.StoredEmailID is set to the stored email's id.
//
// It sends the write and returns without reading the answer, so the
// server stores one message while the caller reads and extracts the next; the payload has been handed to the connection by then and is not
// held. The caller must Wait before using the connection again (pgx allows
// one batch in flight per connection), and an error surfaces at Wait.
func SendOccurrence(ctx context.Context, q Batcher, o mailstore.Occurrence, rec *Record) (*PendingOccurrence, error) {
	if (rec == nil) != (o.Raw == nil) {
		return nil, fmt.Errorf("searchindex: write occurrence (folder %d, UID %d): a record goes with content and only with it", o.FolderID, o.UID)
	}
	if rec != nil {
		o.Extracted = extracted(rec)
	}
	b := &pgx.Batch{}
	var res mailstore.Upserted
	if err := mailstore.QueueUpsertOccurrence(b, o, &res); err != nil {
		return nil, err
	}
	ident := []any{o.AccountID, o.FolderID, int64(o.UIDValidity), int64(o.UID)}
	with := func(args ...any) []any { return append(append([]any{}, ident...), args...) }
	switch {
	case rec == nil || !rec.Readable:
		b.Queue(insertOccurrenceEnvelopeDocumentSQL, with(SourceNotExtracted, MaxSubjectCopyChars)...)
		b.Queue(insertOccurrenceEnvelopePassageSQL, with(mimex.SubjectPassage(clean(o.Subject)))...)
	default:
		if n := min(len(rec.Participants), 32767); n > 0 {
			roles, addrs, comps, names := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
			for i, p := range rec.Participants[:n] {
				roles[i], addrs[i], comps[i], names[i] = p.Role, clean(p.Address), clean(p.Comparison), clean(p.DisplayName)
			}
			b.Queue(insertOccurrenceParticipantsSQL, with(roles, addrs, comps, names)...)
		}
		if n := min(len(rec.Attachments), 32767); n > 0 {
			types, disps, names := make([]string, n), make([]string, n), make([]string, n)
			repaired, tnef := make([]bool, n), make([]bool, n)
			sizes := make([]int64, n)
			for i, a := range rec.Attachments[:n] {
				types[i], disps[i], names[i] = clean(a.MediaType), clean(a.Disposition), clean(a.FileName)
				repaired[i], tnef[i], sizes[i] = a.FileNameRepaired, a.TNEFUnexpanded, a.DecodedBytes
			}
			b.Queue(insertOccurrenceAttachmentsSQL, with(types, disps, names, repaired, sizes, tnef)...)
		}
		b.Queue(writeOccurrenceDocumentSQL, with(rec.TextSource, rec.Lossy, rec.Truncated,
			truncate(clean(rec.Subject), MaxSubjectCopyChars), participantCopy(rec.Participants),
			clean(rec.Text), untrimmedCopy(*rec))...)
		queueOccurrencePassages(b, ident, rec.Passages)
	}
	p := &PendingOccurrence{results: q.SendBatch(ctx, b), res: &res, rec: rec, folderID: o.FolderID, uid: o.UID}
	return p, nil
}

// PendingOccurrence is a write SendOccurrence sent and nobody has read the
// answer of yet. Wait must be called before the connection is used again.
type PendingOccurrence struct {
	results  pgx.BatchResults
	res      *mailstore.Upserted
	rec      *Record
	folderID int64
	uid      uint32
}

// Wait reads the server's answer and returns the stored email's id; it
// sets rec.StoredEmailID.
func (p *PendingOccurrence) Wait() (uuid.UUID, error) {
	if err := p.results.Close(); err != nil {
		if p.res.ID == uuid.Nil {
			return uuid.Nil, err // the upsert's own error, already described
		}
		return uuid.Nil, fmt.Errorf("searchindex: write the extraction of occurrence (folder %d, UID %d): %w", p.folderID, p.uid, err)
	}
	if p.rec != nil {
		p.rec.StoredEmailID = p.res.ID
	}
	return p.res.ID, nil
}

// WriteOccurrence is SendOccurrence followed by Wait.
func WriteOccurrence(ctx context.Context, q Batcher, o mailstore.Occurrence, rec *Record) (uuid.UUID, error) {
	p, err := SendOccurrence(ctx, q, o, rec)
	if err != nil {
		return uuid.Nil, err
	}
	return p.Wait()
}

// extracted is the part of rec stored on the stored_emails row, cleaned
// as Write cleans it.
func extracted(rec *Record) *mailstore.Extracted {
	if !rec.Readable {
		return &mailstore.Extracted{Failure: rec.Failure}
	}
	return &mailstore.Extracted{
		Readable: true,
		SentAt:   rec.SentAt, ReceivedAt: rec.ReceivedAt,
		Subject: clean(rec.Subject), MessageID: clean(rec.MessageID),
		InReplyTo: cleanAll(rec.InReplyTo), References: cleanAll(rec.References),
		AttachmentCount: rec.AttachmentCount, AttachmentDecodedBytes: rec.AttachmentDecodedBytes,
		InlineResourceCount: rec.InlineResourceCount,
		Encrypted:           rec.Encrypted, UnverifiedSignature: rec.UnverifiedSignature, TNEF: rec.TNEF,
	}
}
