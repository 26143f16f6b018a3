package searchindex

import (
	"github.com/google/uuid"

	"context"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/mailfathom/mailfathom/internal/mailstore"
	"github.com/mailfathom/mailfathom/mimex"
)

// Enrichment holds what extraction found in occurrences of one folder
// whose stored_emails rows were sent on one connection (SendOccurrence),
// until Queue writes it for all of them at once: one statement per table
// (participants, attachments, search documents, passages), each finding
// its stored emails by the occurrence identity. PostgreSQL sets up a
// statement's executor, its constraints and the search document's
// generated column once per statement, so writing the rows of many
// messages in one costs it far less than one statement per message and
// table.
//
// The rows it writes are those the per-message statements wrote before:
// a readable record replaces the document and keeps every passage whose
// text did not change (so its vectors are kept too); the participant and
// attachment rows of an earlier extraction were already removed by the
// occurrence's upsert. An unreadable or oversized occurrence gets the
// envelope's document and subject passage only when it has none.
//
// It must be queued on the connection (and in the transaction) its
// occurrences' upserts were sent on, after them; each occurrence at most
// once between two Queue calls. The zero value is ready to use; it is not
// safe for concurrent use.
type Enrichment struct {
	folderID int64
	n        int

	// Readable records: one entry per message, and per participant,
	// attachment and passage.
	docUV, docUID                                []int64
	docSource                                    []string
	docLossy, docTruncated                       []bool
	docSubject, docParticipants, docText, docRaw []string

	partUV, partUID      []int64
	partPos              []int16
	partRole, partAddr   []string
	partComp, partName   []string
	attUV, attUID        []int64
	attPos               []int16
	attType, attDisp     []string
	attName              []string
	attRepaired, attTNEF []bool
	attSize              []int64
	psgUV, psgUID        []int64
	psgOrd               []int16
	psgText              []string

	// Occurrences without a readable record: the envelope's subject
	// passage ("" for none).
	envUV, envUID []int64
	envPassage    []string
}

// Len is how many occurrences the enrichment holds.
func (e *Enrichment) Len() int { return e.n }

// Add takes what rec found in o. rec is nil when o carries no content (it
// gets the envelope's document). It refuses an occurrence of another
// folder than the ones it holds.
func (e *Enrichment) Add(o mailstore.Occurrence, rec *Record) error {
	if e.n > 0 && e.folderID != o.FolderID {
		return fmt.Errorf("searchindex: enrichment of folder %d given an occurrence of folder %d", e.folderID, o.FolderID)
	}
	if o.SharedEmailID != uuid.Nil {
		// An occurrence of an email already stored: the email has its
		// search document and passages; the occurrence gets none.
		return nil
	}
	e.folderID = o.FolderID
	e.n++
	uv, uid := int64(o.UIDValidity), int64(o.UID)
	if rec == nil || !rec.Readable {
		e.envUV, e.envUID = append(e.envUV, uv), append(e.envUID, uid)
		e.envPassage = append(e.envPassage, mimex.SubjectPassage(clean(o.Subject)))
		return nil
	}
	e.docUV, e.docUID = append(e.docUV, uv), append(e.docUID, uid)
	e.docSource = append(e.docSource, rec.TextSource)
	e.docLossy, e.docTruncated = append(e.docLossy, rec.Lossy), append(e.docTruncated, rec.Truncated)
	e.docSubject = append(e.docSubject, truncate(clean(rec.Subject), MaxSubjectCopyChars))
	e.docParticipants = append(e.docParticipants, participantCopy(rec.Participants))
	e.docText = append(e.docText, clean(rec.Text))
	e.docRaw = append(e.docRaw, untrimmedCopy(*rec))
	for i, p := range rec.Participants[:min(len(rec.Participants), 32767)] {
		e.partUV, e.partUID, e.partPos = append(e.partUV, uv), append(e.partUID, uid), append(e.partPos, int16(i))
		e.partRole, e.partAddr = append(e.partRole, p.Role), append(e.partAddr, clean(p.Address))
		e.partComp, e.partName = append(e.partComp, clean(p.Comparison)), append(e.partName, clean(p.DisplayName))
	}
	for i, a := range rec.Attachments[:min(len(rec.Attachments), 32767)] {
		e.attUV, e.attUID, e.attPos = append(e.attUV, uv), append(e.attUID, uid), append(e.attPos, int16(i))
		e.attType, e.attDisp, e.attName = append(e.attType, clean(a.MediaType)), append(e.attDisp, clean(a.Disposition)), append(e.attName, clean(a.FileName))
		e.attRepaired, e.attTNEF, e.attSize = append(e.attRepaired, a.FileNameRepaired), append(e.attTNEF, a.TNEFUnexpanded), append(e.attSize, a.DecodedBytes)
	}
	for _, p := range rec.Passages {
		e.psgUV, e.psgUID = append(e.psgUV, uv), append(e.psgUID, uid)
		e.psgOrd, e.psgText = append(e.psgOrd, p.Ordinal), append(e.psgText, p.Text)
	}
	return nil
}

// storedEmailOf is the id of the stored email of the occurrence in folder
// $1 with t's UIDVALIDITY and UID. The enrichment's statements find each
// row's stored email with it, one index lookup per row whatever the
// planner knows of the tables: a join of the arrays to stored_emails was
// planned, with the statistics of a table still being filled, as a scan of
// the folder's mail for every statement. The subqueries that compute it
// end in OFFSET 0 so the planner keeps them apart and computes it once per
// row.
const storedEmailOf = `(SELECT e.id FROM stored_emails e WHERE e.mail_folder_id = $1 AND e.uid_validity = t.uv AND e.uid = t.uid)`

// The enrichment's statements. A row whose occurrence has no stored email
// (the upsert refused a foreign folder, and the batch fails with it) is
// left out, as a join would leave it.
const (
	enrichParticipantsSQL = `
		INSERT INTO email_participants (stored_email_id, position, role, address, comparison, display_name)
		SELECT x.id, x.pos, x.r, x.a, x.c, nullif(x.d, '')
		FROM (SELECT ` + storedEmailOf + ` AS id, t.*
		      FROM unnest($2::bigint[], $3::bigint[], $4::smallint[], $5::text[], $6::text[], $7::text[], $8::text[]) AS t(uv, uid, pos, r, a, c, d) OFFSET 0) x
		WHERE x.id IS NOT NULL`

	enrichAttachmentsSQL = `
		INSERT INTO email_attachments (stored_email_id, position, media_type, disposition, file_name, file_name_repaired, decoded_bytes, tnef_unexpanded)
		SELECT x.id, x.pos, x.m, nullif(x.d, ''), nullif(x.f, ''), x.r, x.s, x.n
		FROM (SELECT ` + storedEmailOf + ` AS id, t.*
		      FROM unnest($2::bigint[], $3::bigint[], $4::smallint[], $5::text[], $6::text[], $7::text[], $8::boolean[], $9::bigint[], $10::boolean[]) AS t(uv, uid, pos, m, d, f, r, s, n) OFFSET 0) x
		WHERE x.id IS NOT NULL`

	enrichDocumentsSQL = `
		INSERT INTO email_search_documents (stored_email_id, text_source, lossy, truncated, subject, participants, body_text, body_text_untrimmed,
		                                    sent_at, mail_folder_id)
		SELECT x.id, x.src, x.l, x.tr, nullif(x.s, ''), nullif(x.p, ''), nullif(x.b, ''), nullif(x.u, ''),
		       (SELECT e.sent_at FROM stored_emails e WHERE e.id = x.id), $1
		FROM (SELECT ` + storedEmailOf + ` AS id, t.*
		      FROM unnest($2::bigint[], $3::bigint[], $4::text[], $5::boolean[], $6::boolean[], $7::text[], $8::text[], $9::text[], $10::text[]) AS t(uv, uid, src, l, tr, s, p, b, u) OFFSET 0) x
		WHERE x.id IS NOT NULL
		ON CONFLICT (stored_email_id) DO UPDATE SET
			text_source = excluded.text_source, lossy = excluded.lossy, truncated = excluded.truncated,
			subject = excluded.subject, participants = excluded.participants,
			body_text = excluded.body_text, body_text_untrimmed = excluded.body_text_untrimmed,
			sent_at = excluded.sent_at, mail_folder_id = excluded.mail_folder_id`

	// The passages of every readable message named ($2, $3) whose text is
	// not among its derived ones ($4–$7) are removed; a message with no
	// derived passage loses all of them.
	enrichDeleteChangedPassagesSQL = `
		DELETE FROM email_passages p
		WHERE p.stored_email_id = ANY (ARRAY(SELECT ` + storedEmailOf + ` FROM unnest($2::bigint[], $3::bigint[]) AS t(uv, uid)))
		  AND NOT EXISTS (SELECT 1 FROM stored_emails s, unnest($4::bigint[], $5::bigint[], $6::smallint[], $7::text[]) AS n(uv, uid, o, t)
		                  WHERE s.id = p.stored_email_id AND n.uv = s.uid_validity AND n.uid = s.uid AND n.o = p.ordinal AND n.t = p.text)`

	enrichPassagesSQL = `
		WITH inserted AS (
			INSERT INTO email_passages (stored_email_id, ordinal, text)
			SELECT x.id, x.o, x.t
			FROM (SELECT ` + storedEmailOf + ` AS id, t.o, t.t
			      FROM unnest($2::bigint[], $3::bigint[], $4::smallint[], $5::text[]) AS t(uv, uid, o, t) OFFSET 0) x
			WHERE x.id IS NOT NULL
			ON CONFLICT (stored_email_id, ordinal) DO NOTHING
			RETURNING stored_email_id)
		` + owedSQL

	enrichEnvelopeDocumentsSQL = `
		INSERT INTO email_search_documents (stored_email_id, text_source, subject, sent_at, mail_folder_id)
		SELECT e.id, $4, left(e.subject, $5), e.sent_at, e.mail_folder_id
		FROM stored_emails e
		WHERE e.id = ANY (ARRAY(SELECT ` + storedEmailOf + ` FROM unnest($2::bigint[], $3::bigint[]) AS t(uv, uid)))
		ON CONFLICT (stored_email_id) DO NOTHING`

	// An envelope's subject passage is only ever added to a message with
	// no passages: one a run that could read the body derived is kept.
	enrichEnvelopePassagesSQL = `
		WITH inserted AS (
			INSERT INTO email_passages (stored_email_id, ordinal, text)
			SELECT x.id, 0, x.s
			FROM (SELECT ` + storedEmailOf + ` AS id, t.s FROM unnest($2::bigint[], $3::bigint[], $4::text[]) AS t(uv, uid, s) OFFSET 0) x
			WHERE x.id IS NOT NULL AND x.s <> ''
			  AND NOT EXISTS (SELECT 1 FROM email_passages p WHERE p.stored_email_id = x.id)
			RETURNING stored_email_id)
		` + owedSQL
)

// Queue queues the statements that write everything e holds on b and
// empties e. Statements with no rows to write are left out.
func (e *Enrichment) Queue(b *pgx.Batch) {
	f := e.folderID
	if len(e.partUV) > 0 {
		b.Queue(enrichParticipantsSQL, f, e.partUV, e.partUID, e.partPos, e.partRole, e.partAddr, e.partComp, e.partName)
	}
	if len(e.attUV) > 0 {
		b.Queue(enrichAttachmentsSQL, f, e.attUV, e.attUID, e.attPos, e.attType, e.attDisp, e.attName, e.attRepaired, e.attSize, e.attTNEF)
	}
	if len(e.docUV) > 0 {
		b.Queue(enrichDocumentsSQL, f, e.docUV, e.docUID, e.docSource, e.docLossy, e.docTruncated,
			e.docSubject, e.docParticipants, e.docText, e.docRaw)
		b.Queue(enrichDeleteChangedPassagesSQL, f, e.docUV, e.docUID, e.psgUV, e.psgUID, e.psgOrd, e.psgText)
	}
	if len(e.psgUV) > 0 {
		b.Queue(enrichPassagesSQL, f, e.psgUV, e.psgUID, e.psgOrd, e.psgText)
	}
	if len(e.envUV) > 0 {
		b.Queue(enrichEnvelopeDocumentsSQL, f, e.envUV, e.envUID, SourceNotExtracted, MaxSubjectCopyChars)
		b.Queue(enrichEnvelopePassagesSQL, f, e.envUV, e.envUID, e.envPassage)
	}
	// The batch keeps the slices it was given; start new ones.
	*e = Enrichment{}
}

// PendingEnrichment is an enrichment SendEnrichment sent and nobody has
// read the answer of yet. Wait must be called before the connection is
// used again.
type PendingEnrichment struct {
	results pgx.BatchResults
}

// SendEnrichment sends e's statements on q without reading the answer and
// empties e.
func SendEnrichment(ctx context.Context, q Batcher, e *Enrichment) *PendingEnrichment {
	b := &pgx.Batch{}
	e.Queue(b)
	return &PendingEnrichment{results: q.SendBatch(ctx, b)}
}

// Wait reads the server's answer.
func (p *PendingEnrichment) Wait() error {
	if err := p.results.Close(); err != nil {
		return fmt.Errorf("searchindex: write the extraction of stored occurrences: %w", err)
	}
	return nil
}
