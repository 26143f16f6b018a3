package mailstore

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"
)

// Availability is an occurrence's stored_emails.content_availability.
type Availability string

const (
	// Available: the raw MIME is stored.
	Available Availability = "Available"
	// ExceededSizeLimit: the message was larger than the
	// account's size limit; its metadata is stored and its content is not.
	ExceededSizeLimit Availability = "ExceededSizeLimit"
	// ContentWithheld: the server listed the message but kept withholding
	// its content (see NoteWithheld); its metadata is stored and its
	// content is not.
	ContentWithheld Availability = "ContentWithheld"
)

// Occurrence is one remote occurrence as the forward pass fetched it. Its
// identity is (AccountID, FolderID, UIDValidity, UID); FolderID is the id
// of the binding it was synchronized under.
type Occurrence struct {
	AccountID   int64
	FolderID    int64
	UIDValidity uint32
	UID         uint32
	// Size is the RFC822.SIZE the server reported.
	Size int64
	// InternalDate, SentAt: zero for none.
	InternalDate time.Time
	Flags        []string
	// FlagsObservedAt is a moment no later than the one the server reported
	// Flags — for the forward pass, when it sent the FETCH that returned
	// them — and becomes the row's remote_flags_observed_at, its place in
	// the reconciliation queue. Zero stores the flags unobserved (the row
	// joins the never-observed group for a reconciliation window to ask
	// about).
	FlagsObservedAt time.Time
	// Subject, MessageID: the envelope's, "" for none.
	Subject   string
	MessageID string
	SentAt    time.Time
	// Availability is Available with Raw, ExceededSizeLimit or ContentWithheld without.
	Availability Availability
	// Raw is the raw MIME, empty but not nil for an empty message; nil
	// without content.
	Raw []byte
	// Extracted, optional and only with Raw, is what reading Raw found; it
	// is stored on the same row by the same statement.
	Extracted *Extracted

	// ServerEmailID is the server's identity of the message with its
	// scheme ("x-gm-msgid:…", "emailid:…"), "" when the server names none;
	// ServerThreadID likewise for its thread.
	ServerEmailID  string
	ServerThreadID string
	// Labels are the message's labels where the server has them (Gmail),
	// nil where it has none. They are stored on the email, not the
	// occurrence: on the holder when SharedEmailID is set.
	Labels []string
	// SharedEmailID, when set, is the stored email that already holds this
	// occurrence's message (the same ServerEmailID, found by
	// EmailsByServerIdentity): the occurrence is stored without content,
	// extraction or search document, and with the holder's availability.
	// The first write of a new identity leaves it nil and becomes the
	// holder; the one that loses a race for that is a conflict
	// (IsWriteConflict) and is written again once the holder is known.
	SharedEmailID uuid.UUID
	// SharedUnserved, with SharedEmailID, reports that the holder was not
	// served when it was read (SharedEmail.Served): this occurrence serves
	// it again, and the writer offers it for embedding as if it were new,
	// since an embed job that ran meanwhile passed it by.
	SharedUnserved bool
}

// ErrForeignFolder rejects an occurrence whose binding does not exist or
// belongs to another account.
var ErrForeignFolder = errors.New("mailstore: the occurrence's binding does not belong to its account")

// Extracted is what reading an occurrence's raw MIME found, stored on its
// stored_emails row by the same statement that stores the occurrence, so
// the row is written once. Text in it is expected to be storable already
// (it is cleaned again, which changes nothing in clean text).
type Extracted struct {
	// Readable false: only Failure is stored (mime_readable false,
	// mime_failure, extracted_at), and only when no earlier extraction read
	// the message; the envelope's values stay.
	Readable bool
	Failure  string

	// The MIME header's values; empty or nil for none, in which case the
	// envelope's Subject, MessageID and SentAt are stored.
	SentAt, ReceivedAt *time.Time
	Subject, MessageID string
	InReplyTo          []string
	References         []string

	AttachmentCount        int
	AttachmentDecodedBytes int64
	InlineResourceCount    int
	Encrypted              bool
	UnverifiedSignature    bool
	TNEF                   bool
}

// upsertOccurrenceSQL stores one occurrence in one statement: the
// stored_emails row is inserted or, on the occurrence identity, overwritten
// (keeping its id), and its content row is inserted or overwritten in the
// same statement when raw MIME is given. The content is rewritten only when
// its SHA-256 changed, and the stored bytea is never read back.
//
// The binding is read through mail_folders so an occurrence can only be
// attached to a binding of its own account. An occurrence stored with its
// content keeps being Available when a later pass reports it over the size
// limit (a lowered limit): the content it has is kept and stays consistent
// with the availability it reports.
//
// The variants with an extraction also store its columns; a readable one
// replaces an earlier extraction, so on a conflict it also deletes the
// earlier extraction's participant and attachment rows (a first insert has
// none to delete); an unreadable one never overwrites a readable one.
var (
	upsertOccurrenceSQL           = buildUpsertOccurrenceSQL(0)
	upsertReadableOccurrenceSQL   = buildUpsertOccurrenceSQL(1)
	upsertUnreadableOccurrenceSQL = buildUpsertOccurrenceSQL(2)
)

// buildUpsertOccurrenceSQL: extraction 0 none, 1 readable, 2 unreadable.
func buildUpsertOccurrenceSQL(extraction int) string {
	// The raw MIME is the last parameter: pgx appends each parameter's
	// encoding to one buffer, and a parameter after a large payload made
	// that buffer grow again, copying the payload once more.
	columns, values, updates, raw, identity := "", "", "", "$20", 16
	if extraction != 0 {
		raw, identity = "$31", 27
		columns = `,
        mime_readable, mime_failure, extracted_at, received_at, in_reply_to, thread_references,
        attachment_count, attachment_decoded_bytes, inline_resource_count,
        has_encrypted_content, has_unverified_signature, has_tnef`
		values = `, $16, $17, now(), $18, $19, $20, $21, $22, $23, $24, $25, $26`
	}
	switch extraction {
	case 1:
		updates = `,
        mime_readable = true, mime_failure = NULL, extracted_at = now(),
        received_at = excluded.received_at,
        in_reply_to = excluded.in_reply_to, thread_references = excluded.thread_references,
        attachment_count = excluded.attachment_count,
        attachment_decoded_bytes = excluded.attachment_decoded_bytes,
        inline_resource_count = excluded.inline_resource_count,
        has_encrypted_content = excluded.has_encrypted_content,
        has_unverified_signature = excluded.has_unverified_signature,
        has_tnef = excluded.has_tnef`
	case 2:
		updates = `,
        mime_readable = coalesce(e.mime_readable, false),
        mime_failure  = CASE WHEN e.mime_readable THEN e.mime_failure ELSE excluded.mime_failure END,
        extracted_at  = CASE WHEN e.mime_readable THEN e.extracted_at ELSE now() END`
	}
	p := func(i int) string { return fmt.Sprintf("$%d", identity+i) }
	sql := `
WITH email AS (
    INSERT INTO stored_emails AS e (
        id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability,
        rfc822_size, internal_date, remote_flags, remote_flags_observed_at, subject, message_id, sent_at,
        server_email_id, server_thread_id, remote_labels, shared_email_id` + columns + `)
    SELECT $1, f.mailbox_account_id, f.id, $4, $5, $6, $7, $8, $9, $15, $10, $11, $12,
        ` + p(0) + `, ` + p(1) + `, CASE WHEN ` + p(3) + `::uuid IS NULL THEN ` + p(2) + `::text[] END, ` + p(3) + `::uuid` + values + `
    FROM mail_folders f
    WHERE f.id = $3 AND f.mailbox_account_id = $2
    ON CONFLICT ON CONSTRAINT stored_emails_occurrence_key DO UPDATE SET
        content_availability = CASE
            WHEN e.content_availability = 'Available' AND excluded.content_availability <> 'Available'
            THEN e.content_availability
            ELSE excluded.content_availability END,
        rfc822_size   = excluded.rfc822_size,
        internal_date = excluded.internal_date,
        remote_flags  = CASE
            WHEN e.remote_flags_observed_at > excluded.remote_flags_observed_at THEN e.remote_flags
            ELSE excluded.remote_flags END,
        remote_flags_observed_at = greatest(e.remote_flags_observed_at, excluded.remote_flags_observed_at),
        subject       = excluded.subject,
        message_id    = excluded.message_id,
        sent_at       = excluded.sent_at,
        server_thread_id = coalesce(excluded.server_thread_id, e.server_thread_id),
        remote_labels = CASE WHEN e.shared_email_id IS NULL THEN coalesce(excluded.remote_labels, e.remote_labels) END,
        updated_at    = now()` + updates + `
    RETURNING e.id, (e.xmax = 0) AS inserted, e.shared_email_id
), holder_labels AS (
    UPDATE stored_emails h SET remote_labels = ` + p(2) + `::text[]
    FROM email WHERE h.id = email.shared_email_id AND ` + p(2) + `::text[] IS NOT NULL
), content AS (
    INSERT INTO email_message_contents AS c (stored_email_id, raw_mime, byte_length, sha256)
    SELECT email.id, ` + raw + `, $13, $14 FROM email WHERE ` + raw + `::bytea IS NOT NULL AND email.shared_email_id IS NULL
    ON CONFLICT (stored_email_id) DO UPDATE SET
        raw_mime    = excluded.raw_mime,
        byte_length = excluded.byte_length,
        sha256      = excluded.sha256,
        stored_at   = now()
    WHERE c.sha256 IS DISTINCT FROM excluded.sha256
)`
	if extraction == 1 {
		sql += `, earlier_participants AS (
    DELETE FROM email_participants p USING email WHERE p.stored_email_id = email.id AND NOT email.inserted
), earlier_attachments AS (
    DELETE FROM email_attachments a USING email WHERE a.stored_email_id = email.id AND NOT email.inserted
)`
	}
	return sql + `
SELECT id, inserted FROM email`
}

// Upserted is what storing an occurrence did.
type Upserted struct {
	// ID is the local id of its stored email.
	ID uuid.UUID
	// Inserted: the occurrence was not stored before.
	Inserted bool
}

// UpsertOccurrence stores o in one statement and returns the local id of
// its stored email: a new UUIDv7 the first time, the same id every time
// after. Storing an occurrence again overwrites its metadata and, when the
// SHA-256 differs, its content; it never duplicates it. With o.Extracted,
// the extraction's columns are stored by the same statement.
//
// Text the server supplied (subject, Message-ID, flags) is stored as valid
// UTF-8 without NUL characters, which PostgreSQL text cannot hold; invalid
// sequences become U+FFFD.
//
// With o.FlagsObservedAt the flags are an observation made at that moment:
// it becomes remote_flags_observed_at, which puts the row at the back of
// the reconciliation queue like any window's answer, and counts for a
// reconciliation cycle begun before it. An observation never moves
// backwards: a row already observed later keeps its flags and its
// observation (another writer has since asked the server). Without one the
// flags are stored and remote_flags_observed_at is left as it is.
func UpsertOccurrence(ctx context.Context, q Querier, o Occurrence) (uuid.UUID, error) {
	sql, args, err := upsertOccurrenceStatement(o)
	if err != nil {
		return uuid.Nil, err
	}
	var res Upserted
	err = scanUpserted(q.QueryRow(ctx, sql, args...), o, &res)
	return res.ID, err
}

// QueueUpsertOccurrence queues UpsertOccurrence's statement on b; when the
// batch's results are read, res receives what it did (or reading fails with
// UpsertOccurrence's errors).
func QueueUpsertOccurrence(b *pgx.Batch, o Occurrence, res *Upserted) error {
	sql, args, err := upsertOccurrenceStatement(o)
	if err != nil {
		return err
	}
	b.Queue(sql, args...).QueryRow(func(row pgx.Row) error {
		return scanUpserted(row, o, res)
	})
	return nil
}

func scanUpserted(row pgx.Row, o Occurrence, res *Upserted) error {
	err := row.Scan(&res.ID, &res.Inserted)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return fmt.Errorf("%w (account %d, folder %d)", ErrForeignFolder, o.AccountID, o.FolderID)
	case err != nil:
		return fmt.Errorf("mailstore: upsert occurrence (folder %d, UIDVALIDITY %d, UID %d): %w", o.FolderID, o.UIDValidity, o.UID, err)
	}
	return nil
}

func upsertOccurrenceStatement(o Occurrence) (string, []any, error) {
	if err := validateOccurrence(o); err != nil {
		return "", nil, err
	}
	newID, err := uuid.NewV7()
	if err != nil {
		return "", nil, fmt.Errorf("mailstore: upsert occurrence: mint an id: %w", err)
	}
	var (
		length *int64
		digest []byte
	)
	if o.Raw != nil {
		n, sum := int64(len(o.Raw)), sha256.Sum256(o.Raw)
		length, digest = &n, sum[:]
	}
	flags := make([]string, len(o.Flags))
	for i, f := range o.Flags {
		flags[i] = cleanText(f)
	}
	subject, messageID, sentAt := optionalText(o.Subject), optionalText(o.MessageID), optionalTime(o.SentAt)
	sql := upsertOccurrenceSQL
	var extracted []any
	if x := o.Extracted; x != nil {
		sql = upsertUnreadableOccurrenceSQL
		var failure *string
		receivedAt := (*time.Time)(nil)
		inReplyTo, references := []string{}, []string{}
		if x.Readable {
			sql = upsertReadableOccurrenceSQL
			if s := optionalText(x.Subject); s != nil {
				subject = s
			}
			if s := optionalText(x.MessageID); s != nil {
				messageID = s
			}
			if x.SentAt != nil {
				sentAt = x.SentAt
			}
			receivedAt = x.ReceivedAt
			inReplyTo, references = cleanTexts(x.InReplyTo), cleanTexts(x.References)
		} else {
			failure = &x.Failure
		}
		extracted = []any{x.Readable, failure, receivedAt, inReplyTo, references,
			x.AttachmentCount, x.AttachmentDecodedBytes, x.InlineResourceCount,
			x.Encrypted, x.UnverifiedSignature, x.TNEF}
	}
	// The id goes as its 16 bytes: as a uuid.UUID it would be formatted
	// as text by its driver.Valuer and parsed again by the server.
	args := append([]any{
		pgtype.UUID{Bytes: newID, Valid: true}, o.AccountID, o.FolderID, int64(o.UIDValidity), int64(o.UID), string(o.Availability),
		o.Size, optionalTime(o.InternalDate), flags, subject, messageID, sentAt,
		length, digest, optionalTime(o.FlagsObservedAt),
	}, extracted...)
	var labels []string
	if o.Labels != nil {
		labels = cleanTexts(o.Labels)
	}
	shared := pgtype.UUID{Bytes: o.SharedEmailID, Valid: o.SharedEmailID != uuid.Nil}
	args = append(args, optionalText(o.ServerEmailID), optionalText(o.ServerThreadID), labels, shared, o.Raw)
	return sql, args, nil
}

func cleanTexts(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = cleanText(s)
	}
	return out
}

func validateOccurrence(o Occurrence) error {
	id := fmt.Sprintf("(folder %d, UIDVALIDITY %d, UID %d)", o.FolderID, o.UIDValidity, o.UID)
	switch {
	case o.AccountID == 0 || o.FolderID == 0:
		return fmt.Errorf("mailstore: upsert occurrence %s: no account or folder id", id)
	case o.UIDValidity == 0 || o.UID == 0:
		return fmt.Errorf("mailstore: upsert occurrence %s: UIDVALIDITY and UID must be at least 1", id)
	case o.Size < 0:
		return fmt.Errorf("mailstore: upsert occurrence %s: negative size", id)
	case o.SharedEmailID != uuid.Nil && o.ServerEmailID == "":
		return fmt.Errorf("mailstore: upsert occurrence %s: shared with a stored email without a server identity", id)
	case o.SharedEmailID != uuid.Nil && (o.Raw != nil || o.Extracted != nil):
		return fmt.Errorf("mailstore: upsert occurrence %s: content given for an occurrence whose email holds it", id)
	case o.SharedEmailID != uuid.Nil:
		return nil // the holder's availability, whatever it is
	}
	switch o.Availability {
	case Available:
		if o.Raw == nil {
			return fmt.Errorf("mailstore: upsert occurrence %s: Available without content", id)
		}
	case ExceededSizeLimit, ContentWithheld:
		if o.Raw != nil || o.Extracted != nil {
			return fmt.Errorf("mailstore: upsert occurrence %s: content given for an occurrence stored without it", id)
		}
	default:
		return fmt.Errorf("mailstore: upsert occurrence %s: unknown content availability %q", id, string(o.Availability))
	}
	return nil
}

// cleanText makes s storable as PostgreSQL text: valid UTF-8, no NUL.
func cleanText(s string) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if strings.IndexByte(s, 0) >= 0 {
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	return s
}

func optionalText(s string) *string {
	if s == "" {
		return nil
	}
	s = cleanText(s)
	return &s
}

func optionalTime(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	t = t.UTC()
	return &t
}

// StoredUIDs returns the UIDs stored under the binding in one UIDVALIDITY,
// ascending.
func StoredUIDs(ctx context.Context, q Querier, folderID int64, uidValidity uint32) ([]uint32, error) {
	rows, err := q.Query(ctx,
		`SELECT uid FROM stored_emails WHERE mail_folder_id = $1 AND uid_validity = $2 ORDER BY uid`,
		folderID, int64(uidValidity))
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the stored UIDs of folder %d: %w", folderID, err)
	}
	uids, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (uint32, error) {
		var uid int64
		err := row.Scan(&uid)
		return uint32(uid), err
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read the stored UIDs of folder %d: %w", folderID, err)
	}
	return uids, nil
}

// CountOccurrences returns how many occurrences are stored under the
// binding, across every UIDVALIDITY.
func CountOccurrences(ctx context.Context, q Querier, folderID int64) (int64, error) {
	var n int64
	if err := q.QueryRow(ctx, `SELECT count(*) FROM stored_emails WHERE mail_folder_id = $1`, folderID).Scan(&n); err != nil {
		return 0, fmt.Errorf("mailstore: count the occurrences of folder %d: %w", folderID, err)
	}
	return n, nil
}

// StoredOccurrence is what is stored for one occurrence, without its
// content bytes.
type StoredOccurrence struct {
	ID           uuid.UUID
	Availability Availability
	Size         int64
	InternalDate time.Time // zero for none
	Flags        []string
	Subject      string
	MessageID    string
	SentAt       time.Time // zero for none
	// ContentLength and ContentSHA256 describe the stored raw MIME; nil
	// when none is stored.
	ContentLength *int64
	ContentSHA256 []byte
}

// ReadOccurrence returns what is stored for the occurrence, and false when
// nothing is. It reads no content bytes.
func ReadOccurrence(ctx context.Context, q Querier, folderID int64, uidValidity, uid uint32) (StoredOccurrence, bool, error) {
	var (
		s                    StoredOccurrence
		size                 *int64
		internalDate, sentAt *time.Time
		subject, messageID   *string
	)
	err := q.QueryRow(ctx,
		`SELECT e.id, e.content_availability, e.rfc822_size, e.internal_date, e.remote_flags,
		        e.subject, e.message_id, e.sent_at, c.byte_length, c.sha256
		 FROM stored_emails e
		 LEFT JOIN email_message_contents c ON c.stored_email_id = e.id
		 WHERE e.mail_folder_id = $1 AND e.uid_validity = $2 AND e.uid = $3`,
		folderID, int64(uidValidity), int64(uid),
	).Scan(&s.ID, &s.Availability, &size, &internalDate, &s.Flags, &subject, &messageID, &sentAt, &s.ContentLength, &s.ContentSHA256)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return StoredOccurrence{}, false, nil
	case err != nil:
		return StoredOccurrence{}, false, fmt.Errorf("mailstore: read occurrence (folder %d, UIDVALIDITY %d, UID %d): %w", folderID, uidValidity, uid, err)
	}
	if size != nil {
		s.Size = *size
	}
	if internalDate != nil {
		s.InternalDate = *internalDate
	}
	if sentAt != nil {
		s.SentAt = *sentAt
	}
	if subject != nil {
		s.Subject = *subject
	}
	if messageID != nil {
		s.MessageID = *messageID
	}
	return s, true, nil
}

// RawMIME returns the stored raw MIME of a stored email, and nil when only
// its metadata was stored.
func RawMIME(ctx context.Context, q Querier, id uuid.UUID) ([]byte, error) {
	var raw []byte
	err := q.QueryRow(ctx, `SELECT raw_mime FROM email_message_contents WHERE stored_email_id = $1`, id).Scan(&raw)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("mailstore: read the raw MIME of a stored email: %w", err)
	}
	return raw, nil
}
