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
)

// Availability is an occurrence's stored_emails.content_availability.
type Availability string

const (
	// Available: the raw MIME is stored.
	Available Availability = "Available"
	// ExceededSizeLimit: the message was larger than the
	// account's size limit; its metadata is stored and its content is not.
	ExceededSizeLimit Availability = "ExceededSizeLimit"
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
	// Subject, MessageID: the envelope's, "" for none.
	Subject   string
	MessageID string
	SentAt    time.Time
	// Availability is Available with Raw, ExceededSizeLimit without.
	Availability Availability
	// Raw is the raw MIME; nil when Availability is ExceededSizeLimit.
	Raw []byte
}

// ErrForeignFolder rejects an occurrence whose binding does not exist or
// belongs to another account.
var ErrForeignFolder = errors.New("mailstore: the occurrence's binding does not belong to its account")

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
const upsertOccurrenceSQL = `
WITH email AS (
    INSERT INTO stored_emails AS e (
        id, mailbox_account_id, mail_folder_id, uid_validity, uid, content_availability,
        rfc822_size, internal_date, remote_flags, subject, message_id, sent_at)
    SELECT $1, f.mailbox_account_id, f.id, $4, $5, $6, $7, $8, $9, $10, $11, $12
    FROM mail_folders f
    WHERE f.id = $3 AND f.mailbox_account_id = $2
    ON CONFLICT ON CONSTRAINT stored_emails_occurrence_key DO UPDATE SET
        content_availability = CASE
            WHEN e.content_availability = 'Available' AND excluded.content_availability = 'ExceededSizeLimit'
            THEN e.content_availability
            ELSE excluded.content_availability END,
        rfc822_size   = excluded.rfc822_size,
        internal_date = excluded.internal_date,
        remote_flags  = excluded.remote_flags,
        subject       = excluded.subject,
        message_id    = excluded.message_id,
        sent_at       = excluded.sent_at,
        updated_at    = now()
    RETURNING e.id
), content AS (
    INSERT INTO email_message_contents AS c (stored_email_id, raw_mime, byte_length, sha256)
    SELECT email.id, $13, $14, $15 FROM email WHERE $13::bytea IS NOT NULL
    ON CONFLICT (stored_email_id) DO UPDATE SET
        raw_mime    = excluded.raw_mime,
        byte_length = excluded.byte_length,
        sha256      = excluded.sha256,
        stored_at   = now()
    WHERE c.sha256 IS DISTINCT FROM excluded.sha256
)
SELECT id FROM email`

// UpsertOccurrence stores o in one statement and returns the local id of
// its stored email: a new UUIDv7 the first time, the same id every time
// after. Storing an occurrence again overwrites its metadata and, when the
// SHA-256 differs, its content; it never duplicates it.
//
// Text the server supplied (subject, Message-ID, flags) is stored as valid
// UTF-8 without NUL characters, which PostgreSQL text cannot hold; invalid
// sequences become U+FFFD. remote_flags_observed_at is left alone: flags
// are observed by the reconciliation pass.
func UpsertOccurrence(ctx context.Context, q Querier, o Occurrence) (uuid.UUID, error) {
	if err := validateOccurrence(o); err != nil {
		return uuid.Nil, err
	}
	newID, err := uuid.NewV7()
	if err != nil {
		return uuid.Nil, fmt.Errorf("mailstore: upsert occurrence: mint an id: %w", err)
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

	var id uuid.UUID
	err = q.QueryRow(ctx, upsertOccurrenceSQL,
		newID, o.AccountID, o.FolderID, int64(o.UIDValidity), int64(o.UID), string(o.Availability),
		o.Size, optionalTime(o.InternalDate), flags, optionalText(o.Subject), optionalText(o.MessageID), optionalTime(o.SentAt),
		o.Raw, length, digest,
	).Scan(&id)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return uuid.Nil, fmt.Errorf("%w (account %d, folder %d)", ErrForeignFolder, o.AccountID, o.FolderID)
	case err != nil:
		return uuid.Nil, fmt.Errorf("mailstore: upsert occurrence (folder %d, UIDVALIDITY %d, UID %d): %w", o.FolderID, o.UIDValidity, o.UID, err)
	}
	return id, nil
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
	}
	switch o.Availability {
	case Available:
		if o.Raw == nil {
			return fmt.Errorf("mailstore: upsert occurrence %s: Available without content", id)
		}
	case ExceededSizeLimit:
		if o.Raw != nil {
			return fmt.Errorf("mailstore: upsert occurrence %s: content given for an occurrence over the size limit", id)
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
