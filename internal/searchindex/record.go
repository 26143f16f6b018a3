package searchindex

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
)

// Text sources a search document records.
const (
	SourcePlainText     = "PlainText"
	SourceHTMLDerived   = "HtmlDerived"
	SourceEncrypted     = "Encrypted"
	SourceNoTextualBody = "NoTextualBody"
	SourceNotExtracted  = "NotExtracted"
)

// Bounds of the copies a document keeps beside the body text; they are what
// make the generated vector's size predictable: together about 101 000 of
// a tsvector's 1 048 575 bytes, which leaves room for the body text bound
// (MaxExtractedTextCharacters at most 200 000).
const (
	MaxSubjectCopyChars     = 1000
	MaxParticipantCopyCount = 200
	MaxParticipantCopyChars = 100_000
)

// Participant is one address in one role.
type Participant struct {
	Role, Address, Comparison, DisplayName string
}

// Attachment is one part classified as an attachment.
type Attachment struct {
	MediaType, Disposition, FileName string
	FileNameRepaired, TNEFUnexpanded bool
	DecodedBytes                     int64
}

// Record is what extraction found in one stored message. A record with
// Readable false carries only the failure; the envelope values the forward
// pass stored stay as they are.
type Record struct {
	StoredEmailID uuid.UUID
	Readable      bool
	Failure       string

	SentAt, ReceivedAt *time.Time
	Subject            string
	MessageID          string
	InReplyTo          []string
	References         []string
	Participants       []Participant

	AttachmentCount        int
	AttachmentDecodedBytes int64
	InlineResourceCount    int
	Encrypted              bool
	UnverifiedSignature    bool
	TNEF                   bool
	Attachments            []Attachment

	TextSource string
	Lossy      bool
	Truncated  bool
	Text       string
	Untrimmed  string

	// Passages are the subject and trimmed body text cut into bounded
	// passages (derived on the same read as Text).
	Passages []Passage
}

// Write stores rec in the caller's transaction: the markers and metadata on
// the stored email, its participants and attachments (replacing any earlier
// extraction's), its search document and its passages. A readable record's document
// replaces an earlier one; an unreadable record's document is inserted only
// when none exists, so a body an earlier run read is never forgotten.
func Write(ctx context.Context, q Querier, rec Record) error {
	if !rec.Readable {
		if _, err := q.Exec(ctx, `
			UPDATE stored_emails SET mime_readable = false, mime_failure = $2, extracted_at = now()
			WHERE id = $1 AND mime_readable IS NOT TRUE`, rec.StoredEmailID, rec.Failure); err != nil {
			return fmt.Errorf("searchindex: record an unreadable message: %w", err)
		}
		if err := InsertEnvelopeDocument(ctx, q, rec.StoredEmailID); err != nil {
			return err
		}
		return insertEnvelopePassage(ctx, q, rec.StoredEmailID)
	}
	_, err := q.Exec(ctx, `
		UPDATE stored_emails SET
			mime_readable = true, mime_failure = NULL, extracted_at = now(),
			sent_at = coalesce($2, sent_at), received_at = $3,
			subject = coalesce(nullif($4, ''), subject),
			message_id = coalesce(nullif($5, ''), message_id),
			in_reply_to = $6, thread_references = $7,
			attachment_count = $8, attachment_decoded_bytes = $9, inline_resource_count = $10,
			has_encrypted_content = $11, has_unverified_signature = $12, has_tnef = $13
		WHERE id = $1`,
		rec.StoredEmailID, rec.SentAt, rec.ReceivedAt, clean(rec.Subject), clean(rec.MessageID),
		cleanAll(rec.InReplyTo), cleanAll(rec.References),
		rec.AttachmentCount, rec.AttachmentDecodedBytes, rec.InlineResourceCount,
		rec.Encrypted, rec.UnverifiedSignature, rec.TNEF)
	if err != nil {
		return fmt.Errorf("searchindex: record extracted metadata: %w", err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM email_participants WHERE stored_email_id = $1`, rec.StoredEmailID); err != nil {
		return fmt.Errorf("searchindex: replace participants: %w", err)
	}
	if _, err := q.Exec(ctx, `DELETE FROM email_attachments WHERE stored_email_id = $1`, rec.StoredEmailID); err != nil {
		return fmt.Errorf("searchindex: replace attachments: %w", err)
	}
	if n := min(len(rec.Participants), 32767); n > 0 {
		roles, addrs, comps, names := make([]string, n), make([]string, n), make([]string, n), make([]string, n)
		for i, p := range rec.Participants[:n] {
			roles[i], addrs[i], comps[i], names[i] = p.Role, clean(p.Address), clean(p.Comparison), clean(p.DisplayName)
		}
		if _, err := q.Exec(ctx, `
			INSERT INTO email_participants (stored_email_id, position, role, address, comparison, display_name)
			SELECT $1, ord - 1, r, a, c, nullif(d, '')
			FROM unnest($2::text[], $3::text[], $4::text[], $5::text[]) WITH ORDINALITY AS t(r, a, c, d, ord)`,
			rec.StoredEmailID, roles, addrs, comps, names); err != nil {
			return fmt.Errorf("searchindex: insert participants: %w", err)
		}
	}
	if n := min(len(rec.Attachments), 32767); n > 0 {
		types, disps, names := make([]string, n), make([]string, n), make([]string, n)
		repaired, tnef := make([]bool, n), make([]bool, n)
		sizes := make([]int64, n)
		for i, a := range rec.Attachments[:n] {
			types[i], disps[i], names[i] = clean(a.MediaType), clean(a.Disposition), clean(a.FileName)
			repaired[i], tnef[i], sizes[i] = a.FileNameRepaired, a.TNEFUnexpanded, a.DecodedBytes
		}
		if _, err := q.Exec(ctx, `
			INSERT INTO email_attachments (stored_email_id, position, media_type, disposition, file_name, file_name_repaired, decoded_bytes, tnef_unexpanded)
			SELECT $1, ord - 1, m, nullif(d, ''), nullif(f, ''), r, s, t
			FROM unnest($2::text[], $3::text[], $4::text[], $5::boolean[], $6::bigint[], $7::boolean[]) WITH ORDINALITY AS x(m, d, f, r, s, t, ord)`,
			rec.StoredEmailID, types, disps, names, repaired, sizes, tnef); err != nil {
			return fmt.Errorf("searchindex: insert attachments: %w", err)
		}
	}
	_, err = q.Exec(ctx, `
		INSERT INTO email_search_documents (stored_email_id, text_source, lossy, truncated, subject, participants, body_text, body_text_untrimmed,
		                                    sent_at, mail_folder_id)
		VALUES ($1, $2, $3, $4, nullif($5, ''), nullif($6, ''), nullif($7, ''), nullif($8, ''),
		        (SELECT e.sent_at FROM stored_emails e WHERE e.id = $1), (SELECT e.mail_folder_id FROM stored_emails e WHERE e.id = $1))
		ON CONFLICT (stored_email_id) DO UPDATE SET
			text_source = excluded.text_source, lossy = excluded.lossy, truncated = excluded.truncated,
			subject = excluded.subject, participants = excluded.participants,
			body_text = excluded.body_text, body_text_untrimmed = excluded.body_text_untrimmed,
			sent_at = excluded.sent_at, mail_folder_id = excluded.mail_folder_id`,
		rec.StoredEmailID, rec.TextSource, rec.Lossy, rec.Truncated,
		truncate(clean(rec.Subject), MaxSubjectCopyChars), participantCopy(rec.Participants),
		clean(rec.Text), untrimmedCopy(rec))
	if err != nil {
		return fmt.Errorf("searchindex: write the search document: %w", err)
	}
	return writePassages(ctx, q, rec.StoredEmailID, rec.Passages)
}

// InsertEnvelopeDocument gives a message whose body nobody read (oversized,
// or unparseable) a document from the subject its envelope reported, so it
// stays findable by subject. It is inserted only: an existing document,
// which a run that could read the body wrote, is kept.
func InsertEnvelopeDocument(ctx context.Context, q Querier, id uuid.UUID) error {
	_, err := q.Exec(ctx, `
		INSERT INTO email_search_documents (stored_email_id, text_source, subject, sent_at, mail_folder_id)
		SELECT id, $2, left(subject, $3), sent_at, mail_folder_id FROM stored_emails WHERE id = $1
		ON CONFLICT (stored_email_id) DO NOTHING`, id, SourceNotExtracted, MaxSubjectCopyChars)
	if err != nil {
		return fmt.Errorf("searchindex: write an envelope document: %w", err)
	}
	return nil
}

// untrimmedCopy is what a document stores in body_text_untrimmed: the
// untrimmed reading when trimming removed something from the end of it, and
// "" (stored as NULL) when it removed nothing, since body_text then holds
// that reading already: coalesce(body_text_untrimmed, body_text) is the
// untrimmed text either way. Most mail has nothing to trim, and a second
// copy of its body cost PostgreSQL about 0.07 ms per message to compress
// and store during a first synchronization, for no information.
func untrimmedCopy(rec Record) string {
	if rec.Untrimmed == rec.Text {
		return ""
	}
	return clean(rec.Untrimmed)
}

func participantCopy(ps []Participant) string {
	var b strings.Builder
	seen := map[string]bool{}
	for _, p := range ps {
		if len(seen) >= MaxParticipantCopyCount || b.Len() >= MaxParticipantCopyChars {
			break
		}
		c := clean(p.Comparison)
		if c == "" || seen[c] {
			continue
		}
		seen[c] = true
		if b.Len() > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(strings.ToLower(clean(p.Address)))
		if d := clean(p.DisplayName); d != "" {
			b.WriteByte(' ')
			b.WriteString(d)
		}
	}
	return truncate(b.String(), MaxParticipantCopyChars)
}

// clean makes text storable: valid UTF-8 without NUL, which PostgreSQL
// refuses in text. One bad byte must never stop a folder.
func clean(s string) string {
	if utf8.ValidString(s) && !strings.ContainsRune(s, 0) {
		return s
	}
	return strings.ReplaceAll(strings.ToValidUTF8(s, "\uFFFD"), "\x00", "")
}

func cleanAll(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = clean(s)
	}
	return out
}

func truncate(s string, chars int) string {
	if utf8.RuneCountInString(s) <= chars {
		return s
	}
	n := 0
	for i := range s {
		if n == chars {
			return s[:i]
		}
		n++
	}
	return s
}
