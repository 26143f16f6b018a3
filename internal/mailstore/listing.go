package mailstore

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
)

// EmailFilter narrows a listing of the served mail. The zero value of each
// field other than Accounts narrows nothing.
type EmailFilter struct {
	// Accounts are the account keys whose mail may be listed: the
	// configured ones, so a removed account's mail is no longer served.
	// Empty lists nothing.
	Accounts []string
	// Account and Alias narrow to one account and one folder alias: a
	// message is in every alias one of its live occurrences is in
	// (InAlias).
	Account, Alias string
	// ReceivedSince and ReceivedUntil bound when the message was received
	// (its topmost Received header, else the server's internal date):
	// since inclusive, until exclusive.
	ReceivedSince, ReceivedUntil *time.Time
	// SentSince and SentUntil bound its Date header likewise.
	SentSince, SentUntil *time.Time
	// From keeps messages a From or Sender address or display name of
	// which contains it, without regard to case.
	From string
	// To keeps messages a To, Cc or Bcc address or display name of which
	// contains it, without regard to case.
	To string
	// HasAttachment keeps messages with (true) or without (false) an
	// attachment.
	HasAttachment *bool
	// Unread and Flagged keep messages whose flags, as last observed on
	// the server, lack (Unread true) or carry \Seen, and carry (Flagged
	// true) or lack \Flagged.
	Unread, Flagged *bool
	// Label keeps messages that carry it among the server's labels as last
	// observed (Gmail's X-GM-LABELS: `\Inbox`, `\Important`, a user label),
	// without regard to case, as Gmail compares them. A server without
	// labels admits nothing by it.
	Label string
}

// EmailCursor is the position after the last message of a page: listings
// are ordered newest first by Received, then by id.
type EmailCursor struct {
	Received time.Time
	ID       uuid.UUID
}

// EmailSummary is one served message as a listing shows it.
type EmailSummary struct {
	ID         uuid.UUID
	Account    string
	Alias      string
	Subject    string
	From       string // the first From address
	FromName   string // its display name
	SentAt     *time.Time
	ReceivedAt time.Time // the listing's order: Received header, internal date or when first stored
	Unread     bool
	Flagged    bool
	// Attachments counts the parts classified as attachments.
	Attachments int
	// Labels are the server's labels of the message (Gmail's X-GM-LABELS:
	// `\Inbox`, `\Important`, user labels) as last observed; nil where the
	// server has none.
	Labels []string
}

// summaryColumns selects an EmailSummary from served_stored_emails e
// joined to mail_folders f and mailbox_accounts a.
const summaryColumns = `e.id, a.account_key, f.alias, coalesce(e.subject, ''),
	coalesce(fp.address, ''), coalesce(fp.display_name, ''), e.sent_at,
	coalesce(e.received_at, e.internal_date, e.first_stored_at),
	NOT EXISTS (SELECT 1 FROM unnest(e.remote_flags) fl WHERE lower(fl) = '\seen'),
	EXISTS (SELECT 1 FROM unnest(e.remote_flags) fl WHERE lower(fl) = '\flagged'),
	e.attachment_count, e.remote_labels`

// summaryFrom is the FROM clause summaryColumns reads.
const summaryFrom = `served_stored_emails e
	JOIN mail_folders f ON f.id = e.mail_folder_id
	JOIN mailbox_accounts a ON a.id = e.mailbox_account_id
	LEFT JOIN LATERAL (SELECT p.address, p.display_name FROM email_participants p
	                   WHERE p.stored_email_id = e.id AND p.role = 'From' ORDER BY p.position LIMIT 1) fp ON true`

func scanSummary(row pgx.CollectableRow) (EmailSummary, error) {
	var s EmailSummary
	err := row.Scan(&s.ID, &s.Account, &s.Alias, &s.Subject, &s.From, &s.FromName, &s.SentAt, &s.ReceivedAt,
		&s.Unread, &s.Flagged, &s.Attachments, &s.Labels)
	return s, err
}

// filterWhere returns the conditions of f over summaryFrom, its arguments
// numbered from $1.
func (f EmailFilter) where() (string, []any) {
	var (
		conds []string
		args  []any
	)
	arg := func(v any) string {
		args = append(args, v)
		return fmt.Sprintf("$%d", len(args))
	}
	conds = append(conds, "a.account_key = ANY("+arg(f.Accounts)+"::text[])")
	if f.Account != "" {
		conds = append(conds, "a.account_key = "+arg(f.Account))
	}
	if f.Alias != "" {
		conds = append(conds, InAlias("e", "f", arg(f.Alias)))
	}
	received := "coalesce(e.received_at, e.internal_date, e.first_stored_at)"
	if f.ReceivedSince != nil {
		conds = append(conds, received+" >= "+arg(*f.ReceivedSince))
	}
	if f.ReceivedUntil != nil {
		conds = append(conds, received+" < "+arg(*f.ReceivedUntil))
	}
	if f.SentSince != nil {
		conds = append(conds, "e.sent_at >= "+arg(*f.SentSince))
	}
	if f.SentUntil != nil {
		conds = append(conds, "e.sent_at < "+arg(*f.SentUntil))
	}
	participant := func(roles, who string) string {
		pattern := "%" + likeEscaper.Replace(strings.ToUpper(who)) + "%"
		p := arg(pattern)
		return `EXISTS (SELECT 1 FROM email_participants p WHERE p.stored_email_id = e.id
			AND p.role IN (` + roles + `) AND (p.comparison LIKE ` + p + ` OR upper(coalesce(p.display_name, '')) LIKE ` + p + `))`
	}
	if f.From != "" {
		conds = append(conds, participant(`'From', 'Sender'`, f.From))
	}
	if f.To != "" {
		conds = append(conds, participant(`'To', 'Cc', 'Bcc'`, f.To))
	}
	if f.HasAttachment != nil {
		conds = append(conds, "(e.attachment_count > 0) = "+arg(*f.HasAttachment))
	}
	if f.Unread != nil {
		conds = append(conds, `NOT EXISTS (SELECT 1 FROM unnest(e.remote_flags) fl WHERE lower(fl) = '\seen') = `+arg(*f.Unread))
	}
	if f.Flagged != nil {
		conds = append(conds, `EXISTS (SELECT 1 FROM unnest(e.remote_flags) fl WHERE lower(fl) = '\flagged') = `+arg(*f.Flagged))
	}
	if f.Label != "" {
		conds = append(conds, `EXISTS (SELECT 1 FROM unnest(e.remote_labels) l WHERE lower(l) = lower(`+arg(f.Label)+`))`)
	}
	return strings.Join(conds, "\n\t\t  AND "), args
}

// InAlias is the condition that the served email row email (of
// served_stored_emails), whose own folder is folder (mail_folders), lives in
// a folder of alias (a SQL expression): its own occurrence there, or one
// that shares it (shared_email_id), while that occurrence lives — no
// tombstone, of its folder's served UID space, as served_stored_emails
// counts them. A message Gmail shows in INBOX and under a label is in both
// aliases; one that left a folder is no longer in its alias, though it is
// still served from another.
func InAlias(email, folder, alias string) string {
	return `((` + folder + `.alias = ` + alias + ` AND ` + email + `.remote_expunge_observed_at IS NULL
		AND (` + folder + `.served_uid_validity IS NULL OR ` + email + `.uid_validity = ` + folder + `.served_uid_validity))
	 OR EXISTS (SELECT 1 FROM stored_emails o JOIN mail_folders g ON g.id = o.mail_folder_id
		WHERE o.shared_email_id = ` + email + `.id AND g.alias = ` + alias + ` AND o.remote_expunge_observed_at IS NULL
		  AND (g.served_uid_validity IS NULL OR o.uid_validity = g.served_uid_validity)))`
}

// AliasShared reports whether a folder of alias, of one of accounts (of
// account alone when it is not ""), holds a live occurrence of an email
// held in another row: then the emails InAlias admits are more than those
// whose own row is in the alias's folders.
func AliasShared(ctx context.Context, q Querier, accounts []string, account, alias string) (bool, error) {
	var shared bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM stored_emails o
		JOIN mail_folders g ON g.id = o.mail_folder_id
		JOIN mailbox_accounts a ON a.id = g.mailbox_account_id
		WHERE o.shared_email_id IS NOT NULL AND g.alias = $3
		  AND a.account_key = ANY($1::text[]) AND ($2 = '' OR a.account_key = $2)
		  AND o.remote_expunge_observed_at IS NULL
		  AND (g.served_uid_validity IS NULL OR o.uid_validity = g.served_uid_validity))`,
		accounts, account, alias).Scan(&shared)
	if err != nil {
		return false, fmt.Errorf("mailstore: read whether an alias holds shared emails: %w", err)
	}
	return shared, nil
}

// likeEscaper escapes LIKE's wildcards and its escape character, so a
// participant filter matches the text it is given.
var likeEscaper = strings.NewReplacer(`\`, `\\`, `%`, `\%`, `_`, `\_`)

// ListEmails returns at most limit served messages matching f, newest
// first, after the cursor when one is given; it does not say whether more
// follow (ask for one more than wanted to know).
func ListEmails(ctx context.Context, q Querier, f EmailFilter, after *EmailCursor, limit int) ([]EmailSummary, error) {
	if len(f.Accounts) == 0 || limit <= 0 {
		return nil, nil
	}
	where, args := f.where()
	if after != nil {
		args = append(args, after.Received, after.ID)
		where += fmt.Sprintf("\n\t\t  AND (coalesce(e.received_at, e.internal_date, e.first_stored_at), e.id) < ($%d, $%d)", len(args)-1, len(args))
	}
	args = append(args, limit)
	rows, err := q.Query(ctx, `SELECT `+summaryColumns+`
		FROM `+summaryFrom+`
		WHERE `+where+`
		ORDER BY coalesce(e.received_at, e.internal_date, e.first_stored_at) DESC, e.id DESC
		LIMIT $`+fmt.Sprint(len(args)), args...)
	if err != nil {
		return nil, fmt.Errorf("mailstore: list emails: %w", err)
	}
	out, err := pgx.CollectRows(rows, scanSummary)
	if err != nil {
		return nil, fmt.Errorf("mailstore: list emails: %w", err)
	}
	return out, nil
}

// FilterEmails returns the summaries of those of ids that are served and
// match f, in the order of ids: a search's hits narrowed by the filters a
// listing takes.
func FilterEmails(ctx context.Context, q Querier, ids []uuid.UUID, f EmailFilter) ([]EmailSummary, error) {
	if len(f.Accounts) == 0 || len(ids) == 0 {
		return nil, nil
	}
	where, args := f.where()
	args = append(args, ids)
	rows, err := q.Query(ctx, `SELECT `+summaryColumns+`
		FROM `+summaryFrom+`
		WHERE e.id = ANY($`+fmt.Sprint(len(args))+`::uuid[]) AND `+where, args...)
	if err != nil {
		return nil, fmt.Errorf("mailstore: filter emails: %w", err)
	}
	found, err := pgx.CollectRows(rows, scanSummary)
	if err != nil {
		return nil, fmt.Errorf("mailstore: filter emails: %w", err)
	}
	byID := make(map[uuid.UUID]EmailSummary, len(found))
	for _, s := range found {
		byID[s.ID] = s
	}
	out := make([]EmailSummary, 0, len(found))
	for _, id := range ids {
		if s, ok := byID[id]; ok {
			out = append(out, s)
			delete(byID, id)
		}
	}
	return out, nil
}

// AliasBound reports whether alias has been resolved to a remote folder
// for one of accounts: until then no mail of it is stored.
func AliasBound(ctx context.Context, q Querier, accounts []string, alias string) (bool, error) {
	var bound bool
	err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM mail_folders f JOIN mailbox_accounts a ON a.id = f.mailbox_account_id
		WHERE a.account_key = ANY($1::text[]) AND f.alias = $2)`, accounts, alias).Scan(&bound)
	if err != nil {
		return false, fmt.Errorf("mailstore: read alias binding: %w", err)
	}
	return bound, nil
}

// EmailLabels returns the server's labels (remote_labels) of those of ids
// that have any, by id: what a search's hits show of each message. It
// does not check that a message is served; the search that found it did.
func EmailLabels(ctx context.Context, q Querier, ids []uuid.UUID) (map[uuid.UUID][]string, error) {
	out := map[uuid.UUID][]string{}
	if len(ids) == 0 {
		return out, nil
	}
	rows, err := q.Query(ctx, `SELECT id, remote_labels FROM stored_emails
		WHERE id = ANY($1::uuid[]) AND cardinality(remote_labels) > 0`, ids)
	if err != nil {
		return nil, fmt.Errorf("mailstore: read email labels: %w", err)
	}
	var (
		id     uuid.UUID
		labels []string
	)
	_, err = pgx.ForEachRow(rows, []any{&id, &labels}, func() error {
		out[id] = labels
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("mailstore: read email labels: %w", err)
	}
	return out, nil
}
