package mailstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// Email is one served message as a reader sees it: its summary, headers
// that place it in a conversation, its participants, what its attachments
// are (never their content) and its extracted body text.
type Email struct {
	EmailSummary
	MessageID    string
	InReplyTo    []string
	References   []string
	Participants []Participant
	Attachments  []Attachment
	// Availability is the content's: Available, ExceededSizeLimit,
	// NotFetched or withheld.
	Availability string
	// TextSource is where Body came from: PlainText, HtmlDerived,
	// Encrypted, NoTextualBody or NotExtracted ("" when nothing was
	// extracted yet).
	TextSource string
	// Lossy reports a body derived from HTML whose reading lost
	// structure (tables, images, layout).
	Lossy bool
	// Truncated reports a body cut at the extraction bound.
	Truncated bool
	// Body is the body text trimmed of quoted history and signatures.
	Body string
}

// Participant is one address of a message in one role.
type Participant struct {
	Role    string // Sender, From, ReplyTo, To, Cc or Bcc
	Address string
	Name    string
}

// Attachment describes one part classified as an attachment. FileName is
// the sanitized name extraction stored.
type Attachment struct {
	MediaType    string
	Disposition  string
	FileName     string
	DecodedBytes int64
}

// ReadEmail returns the served message id of one of accounts, and false
// when there is none: unknown, tombstoned, of an abandoned UID space or
// of an account not among accounts.
func ReadEmail(ctx context.Context, q Querier, accounts []string, id uuid.UUID) (Email, bool, error) {
	var e Email
	rows, err := q.Query(ctx, `SELECT `+summaryColumns+`, coalesce(e.message_id, ''), e.in_reply_to, e.thread_references,
		       e.content_availability, coalesce(d.text_source, ''), coalesce(d.lossy, false), coalesce(d.truncated, false),
		       coalesce(d.body_text, '')
		FROM `+summaryFrom+`
		LEFT JOIN email_search_documents d ON d.stored_email_id = e.id
		WHERE e.id = $1 AND a.account_key = ANY($2::text[])`, id, accounts)
	if err != nil {
		return Email{}, false, fmt.Errorf("mailstore: read email: %w", err)
	}
	e, err = pgx.CollectExactlyOneRow(rows, func(row pgx.CollectableRow) (Email, error) {
		var e Email
		s := &e.EmailSummary
		err := row.Scan(&s.ID, &s.Account, &s.Alias, &s.Subject, &s.From, &s.FromName, &s.SentAt, &s.ReceivedAt,
			&s.Unread, &s.Flagged, &s.Attachments, &s.Labels,
			&e.MessageID, &e.InReplyTo, &e.References, &e.Availability, &e.TextSource, &e.Lossy, &e.Truncated, &e.Body)
		return e, err
	})
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Email{}, false, nil
	case err != nil:
		return Email{}, false, fmt.Errorf("mailstore: read email: %w", err)
	}
	rows, err = q.Query(ctx, `SELECT role, address, coalesce(display_name, '') FROM email_participants
		WHERE stored_email_id = $1 ORDER BY position`, id)
	if err != nil {
		return Email{}, false, fmt.Errorf("mailstore: read email participants: %w", err)
	}
	e.Participants, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Participant, error) {
		var p Participant
		return p, row.Scan(&p.Role, &p.Address, &p.Name)
	})
	if err != nil {
		return Email{}, false, fmt.Errorf("mailstore: read email participants: %w", err)
	}
	rows, err = q.Query(ctx, `SELECT media_type, coalesce(disposition, ''), coalesce(file_name, ''), decoded_bytes
		FROM email_attachments WHERE stored_email_id = $1 ORDER BY position`, id)
	if err != nil {
		return Email{}, false, fmt.Errorf("mailstore: read email attachments: %w", err)
	}
	e.Attachments, err = pgx.CollectRows(rows, func(row pgx.CollectableRow) (Attachment, error) {
		var a Attachment
		return a, row.Scan(&a.MediaType, &a.Disposition, &a.FileName, &a.DecodedBytes)
	})
	if err != nil {
		return Email{}, false, fmt.Errorf("mailstore: read email attachments: %w", err)
	}
	return e, true, nil
}

// ReadThread returns at most limit served messages of accounts in the
// conversation of the served message id, oldest first by Date, and false
// when id is not served.
//
// A message the server names a thread of (Gmail's X-GM-THRID, RFC 8474's
// THREADID: server_thread_id) has the server's conversation: every served
// message of its account with the same thread identity, whatever their
// headers say. Otherwise the conversation is the messages whose Message-ID
// the message refers to (In-Reply-To, References), the messages that refer
// to its Message-ID or to any of those, and the message itself: the
// references a message carries name its whole ancestry, so one step
// reaches every message that shares an ancestor with it. The two are not
// mixed: a server's thread is not widened by headers.
func ReadThread(ctx context.Context, q Querier, accounts []string, id uuid.UUID, limit int) ([]EmailSummary, bool, error) {
	var (
		ids     []string
		account int64
		thread  *string
	)
	err := q.QueryRow(ctx, `SELECT array_remove(array_append(e.thread_references || e.in_reply_to, e.message_id), NULL),
		       e.mailbox_account_id, e.server_thread_id
		FROM served_stored_emails e JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
		WHERE e.id = $1 AND a.account_key = ANY($2::text[])`, id, accounts).Scan(&ids, &account, &thread)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return nil, false, nil
	case err != nil:
		return nil, false, fmt.Errorf("mailstore: read thread: %w", err)
	}
	conversation, args := `(e.id = $3 OR e.message_id = ANY($4::text[]) OR e.thread_references && $4::text[] OR e.in_reply_to && $4::text[])`,
		[]any{accounts, limit, id, ids}
	if thread != nil {
		conversation, args = `e.mailbox_account_id = $3 AND e.server_thread_id = $4`, []any{accounts, limit, account, *thread}
	}
	rows, err := q.Query(ctx, `SELECT `+summaryColumns+`
		FROM `+summaryFrom+`
		WHERE a.account_key = ANY($1::text[]) AND `+conversation+`
		ORDER BY e.sent_at NULLS LAST, coalesce(e.received_at, e.internal_date, e.first_stored_at), e.id
		LIMIT $2`, args...)
	if err != nil {
		return nil, false, fmt.Errorf("mailstore: read thread: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanSummary)
	if err != nil {
		return nil, false, fmt.Errorf("mailstore: read thread: %w", err)
	}
	return out, true, nil
}
