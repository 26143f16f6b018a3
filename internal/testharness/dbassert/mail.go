package dbassert

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Occurrence is one stored occurrence — a message at a UID of a folder
// binding — with what is stored of its content.
type Occurrence struct {
	ID      uuid.UUID
	Account string
	// FolderID is its binding's id; Alias and Generation name it.
	FolderID    int64
	Alias       string
	Generation  int
	UIDValidity uint32
	UID         uint32
	// Availability is the content's: Available, ExceededSizeLimit,
	// NotFetched or ContentWithheld.
	Availability string
	Flags        []string
	// FlagsObservedAt is when its flags were last observed, nil for never.
	FlagsObservedAt *time.Time
	// Tombstoned reports an observed expunge, observed at
	// ExpungeObservedAt; ExpungeReason says whose.
	Tombstoned        bool
	ExpungeObservedAt *time.Time
	ExpungeReason     string
	MessageID         string
	ServerThreadID    string
	Labels            []string
	AttachmentCount   int
	// MIMEReadable is nil before extraction read the message; MIMEFailure
	// names why it could not.
	MIMEReadable *bool
	MIMEFailure  string
	// ContentSHA256 and ContentLength describe its stored raw MIME, nil
	// when none is stored under its own id.
	ContentSHA256 []byte
	ContentLength *int64
	// SharedEmailID is the stored email whose content this occurrence
	// shares (the server named both the same message), nil for one that
	// holds its own.
	SharedEmailID *uuid.UUID
	// Served reports that readers see it (served_stored_emails).
	Served bool
}

// State is the occurrence's flags, then " [tombstone]" once its expunge
// was observed: what a reconciliation reflected of the server.
func (o Occurrence) State() string {
	s := strings.Join(o.Flags, " ")
	if o.Tombstoned {
		s += " [tombstone]"
	}
	return s
}

const occurrenceSelect = `
	SELECT e.id, a.account_key, f.id, f.alias, f.generation, e.uid_validity, e.uid, e.content_availability,
	       e.remote_flags, e.remote_flags_observed_at, e.remote_expunge_observed_at IS NOT NULL, e.remote_expunge_observed_at,
	       coalesce(e.remote_expunge_reason, ''), coalesce(e.message_id, ''), coalesce(e.server_thread_id, ''),
	       e.remote_labels, e.attachment_count, e.mime_readable, coalesce(e.mime_failure, ''),
	       c.sha256, c.byte_length, e.shared_email_id, s.id IS NOT NULL
	FROM stored_emails e
	JOIN mail_folders f ON f.id = e.mail_folder_id
	JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
	LEFT JOIN email_message_contents c ON c.stored_email_id = e.id
	LEFT JOIN served_stored_emails s ON s.id = e.id`

func scanOccurrence(row pgx.CollectableRow) (Occurrence, error) {
	var o Occurrence
	var validity, uid int64
	err := row.Scan(&o.ID, &o.Account, &o.FolderID, &o.Alias, &o.Generation, &validity, &uid, &o.Availability,
		&o.Flags, &o.FlagsObservedAt, &o.Tombstoned, &o.ExpungeObservedAt, &o.ExpungeReason, &o.MessageID, &o.ServerThreadID,
		&o.Labels, &o.AttachmentCount, &o.MIMEReadable, &o.MIMEFailure, &o.ContentSHA256, &o.ContentLength,
		&o.SharedEmailID, &o.Served)
	o.UIDValidity, o.UID = uint32(validity), uint32(uid)
	return o, err
}

func readOccurrences(ctx context.Context, q Querier, sql string, args ...any) ([]Occurrence, error) {
	rows, err := q.Query(ctx, sql, args...)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, scanOccurrence)
}

func occurrences(tb testing.TB, q Querier, doing, sql string, args ...any) []Occurrence {
	tb.Helper()
	out, err := readOccurrences(context.Background(), q, sql, args...)
	check(tb, err, doing)
	return out
}

// Occurrences returns every stored occurrence of alias, of every account
// and binding generation, tombstones included, in account, generation,
// UIDVALIDITY and UID order; alias "" returns those of every alias.
func Occurrences(tb testing.TB, q Querier, alias string) []Occurrence {
	tb.Helper()
	out, err := ReadOccurrences(context.Background(), q, alias)
	check(tb, err, fmt.Sprintf("read the occurrences of alias %q", alias))
	return out
}

// ReadOccurrences is Occurrences for a caller that may not fail the
// test: it returns the error.
func ReadOccurrences(ctx context.Context, q Querier, alias string) ([]Occurrence, error) {
	return readOccurrences(ctx, q,
		occurrenceSelect+` WHERE $1 = '' OR f.alias = $1 ORDER BY a.account_key, f.alias, f.generation, e.uid_validity, e.uid`, alias)
}

// OccurrenceByID returns the stored occurrence id, and fails the test
// when there is none.
func OccurrenceByID(tb testing.TB, q Querier, id uuid.UUID) Occurrence {
	tb.Helper()
	found := occurrences(tb, q, "read an occurrence", occurrenceSelect+` WHERE e.id = $1`, id)
	if len(found) == 0 {
		tb.Fatalf("dbassert: no stored occurrence %s", id)
	}
	return found[0]
}

// OccurrenceAt returns the occurrence stored at uid of the binding
// folderID in UIDVALIDITY uidValidity, and fails the test when there is
// none.
func OccurrenceAt(tb testing.TB, q Querier, folderID int64, uidValidity, uid uint32) Occurrence {
	tb.Helper()
	found := occurrences(tb, q, "read an occurrence",
		occurrenceSelect+` WHERE e.mail_folder_id = $1 AND e.uid_validity = $2 AND e.uid = $3`,
		folderID, int64(uidValidity), int64(uid))
	if len(found) == 0 {
		tb.Fatalf("dbassert: nothing stored at UID %d of folder %d, UIDVALIDITY %d", uid, folderID, uidValidity)
	}
	return found[0]
}

// StoreCounts are how many rows the store holds of each kind.
type StoreCounts struct {
	// Occurrences are stored occurrences, tombstones included; Contents
	// raw MIME rows; SearchDocuments search documents; Served the emails
	// readers see.
	Occurrences, Contents, SearchDocuments, Served int
}

// Counts reads how many occurrences, raw MIME rows, search documents and
// served emails the store holds.
func Counts(tb testing.TB, q Querier) StoreCounts {
	tb.Helper()
	c, err := ReadCounts(context.Background(), q)
	check(tb, err, "count the stored rows")
	return c
}

// ReadCounts is Counts for a caller that may not fail the test: it
// returns the error.
func ReadCounts(ctx context.Context, q Querier) (StoreCounts, error) {
	var c StoreCounts
	err := q.QueryRow(ctx, `
		SELECT (SELECT count(*) FROM stored_emails), (SELECT count(*) FROM email_message_contents),
		       (SELECT count(*) FROM email_search_documents), (SELECT count(*) FROM served_stored_emails)`,
	).Scan(&c.Occurrences, &c.Contents, &c.SearchDocuments, &c.Served)
	return c, err
}

// TruncateStoredEmails empties stored_emails and every table that refers
// to it (TRUNCATE … CASCADE): the store holds no mail any more.
func TruncateStoredEmails(tb testing.TB, q Querier) {
	tb.Helper()
	exec(tb, q, "truncate the stored emails", `TRUNCATE stored_emails CASCADE`)
}

// MarkExpunged records that the server expunged the stored occurrence id
// now, as a reconciliation that saw it leave does: it is a tombstone, no
// longer served.
func MarkExpunged(tb testing.TB, q Querier, id uuid.UUID) {
	tb.Helper()
	exec(tb, q, "mark an occurrence expunged",
		`UPDATE stored_emails SET remote_expunge_observed_at = now() WHERE id = $1`, id)
}

// SetLabels records labels as the server's labels of the stored email id,
// as a Gmail reconciliation does.
func SetLabels(tb testing.TB, q Querier, id uuid.UUID, labels []string) {
	tb.Helper()
	exec(tb, q, "set an email's labels", `UPDATE stored_emails SET remote_labels = $2 WHERE id = $1`, id, labels)
}

// SetServerEmailID records serverID as the server's own identity of the
// stored email id (Gmail's X-GM-MSGID, an OBJECTID server's EMAILID).
func SetServerEmailID(tb testing.TB, q Querier, id uuid.UUID, serverID string) {
	tb.Helper()
	exec(tb, q, "set an email's server identity",
		`UPDATE stored_emails SET server_email_id = $2 WHERE id = $1`, id, serverID)
}

// ForgetObservedFlags leaves every occurrence of the binding folderID
// never observed, as a version that did not record the flags it fetched
// as observations left them.
func ForgetObservedFlags(tb testing.TB, q Querier, folderID int64) {
	tb.Helper()
	exec(tb, q, "forget the observed flags of a folder",
		`UPDATE stored_emails SET remote_flags_observed_at = NULL WHERE mail_folder_id = $1`, folderID)
}

// ClearFlags leaves the occurrences at uid of the binding folderID with
// no flags, never observed, as a carried relocation leaves an occurrence.
func ClearFlags(tb testing.TB, q Querier, folderID int64, uid uint32) {
	tb.Helper()
	exec(tb, q, "clear an occurrence's flags", `UPDATE stored_emails SET remote_flags = '{}', remote_flags_observed_at = NULL
		WHERE mail_folder_id = $1 AND uid = $2`, folderID, int64(uid))
}
