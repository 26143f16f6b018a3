package mcpserver

import (
	"context"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/mailstore"
)

// filters are the narrowing arguments list_emails, search_emails and
// find_similar_emails share.
type filters struct {
	Account       string `json:"account,omitempty" jsonschema:"only this account (its id from list_accounts)"`
	Alias         string `json:"alias,omitempty" jsonschema:"only this folder alias (from list_folders)"`
	ReceivedSince string `json:"received_since,omitempty" jsonschema:"only mail received at or after this time: RFC 3339 (2025-06-01T09:00:00Z) or a date (2025-06-01, UTC)"`
	ReceivedUntil string `json:"received_until,omitempty" jsonschema:"only mail received before this time: RFC 3339 or a date (UTC)"`
	SentSince     string `json:"sent_since,omitempty" jsonschema:"only mail whose Date is at or after this time: RFC 3339 or a date (UTC)"`
	SentUntil     string `json:"sent_until,omitempty" jsonschema:"only mail whose Date is before this time: RFC 3339 or a date (UTC)"`
	From          string `json:"from,omitempty" jsonschema:"only mail from a sender whose address or name contains this text (any case)"`
	To            string `json:"to,omitempty" jsonschema:"only mail to, or copied to, a recipient whose address or name contains this text (any case)"`
	HasAttachment *bool  `json:"has_attachment,omitempty" jsonschema:"only mail with (true) or without (false) attachments"`
	Unread        *bool  `json:"unread,omitempty" jsonschema:"only unread (true) or read (false) mail, as last observed on the server"`
	Flagged       *bool  `json:"flagged,omitempty" jsonschema:"only flagged (true) or unflagged (false) mail, as last observed on the server"`
	Label         string `json:"label,omitempty" jsonschema:"only mail carrying this server label (Gmail: \\Inbox, \\Important or a user label), any case, as last observed on the server"`
}

// emailFilter checks f and returns the store's filter over the configured
// accounts, or a tool error for an unknown account, an alias no account
// configures, an alias not yet resolved, or a malformed time.
func (s *server) emailFilter(ctx context.Context, f filters) (mailstore.EmailFilter, error) {
	account, err := s.account(f.Account)
	if err != nil {
		return mailstore.EmailFilter{}, err
	}
	out := mailstore.EmailFilter{Accounts: s.accounts, Account: account, From: strings.TrimSpace(f.From), To: strings.TrimSpace(f.To),
		HasAttachment: f.HasAttachment, Unread: f.Unread, Flagged: f.Flagged, Label: strings.TrimSpace(f.Label)}
	if f.Alias != "" {
		if out.Alias, err = s.alias(ctx, account, f.Alias); err != nil {
			return mailstore.EmailFilter{}, err
		}
	}
	for _, t := range []struct {
		name  string
		value string
		into  **time.Time
	}{
		{"received_since", f.ReceivedSince, &out.ReceivedSince},
		{"received_until", f.ReceivedUntil, &out.ReceivedUntil},
		{"sent_since", f.SentSince, &out.SentSince},
		{"sent_until", f.SentUntil, &out.SentUntil},
	} {
		if t.value == "" {
			continue
		}
		at, err := parseTime(t.value)
		if err != nil {
			return mailstore.EmailFilter{}, refusef("%s must be an RFC 3339 time (2025-06-01T09:00:00Z) or a date (2025-06-01)", t.name)
		}
		*t.into = &at
	}
	return out, nil
}

// alias returns the normalized alias, or a tool error when no configured
// account (or account, when given) has it or it is not resolved yet.
func (s *server) alias(ctx context.Context, account, alias string) (string, error) {
	alias = config.NormalizeAlias(alias)
	var configured []string
	for _, a := range s.Config.Accounts {
		if account != "" && config.AccountKey(a.ID) != account {
			continue
		}
		for _, f := range a.Folders {
			configured = append(configured, f.Alias)
		}
	}
	if !slices.Contains(configured, alias) {
		return "", refusef("alias %q is not a configured folder alias; configured: %s (see list_folders)", alias, strings.Join(configured, ", "))
	}
	accounts := s.accounts
	if account != "" {
		accounts = []string{account}
	}
	bound, err := mailstore.AliasBound(ctx, s.Pool, accounts, alias)
	if err != nil {
		return "", err
	}
	if !bound {
		return "", refusef("alias %q has not been resolved to a folder on the server yet: nothing of it is stored (see list_folders)", alias)
	}
	return alias, nil
}

func parseTime(v string) (time.Time, error) {
	v = strings.TrimSpace(v)
	if t, err := time.Parse(time.RFC3339, v); err == nil {
		return t, nil
	}
	return time.Parse(time.DateOnly, v)
}

// limit returns the results one call answers with: asked, when between 1
// and the configured bound, else the bound.
func (s *server) limit(asked int) int {
	if asked <= 0 || asked > s.Config.MCP.MaxResults {
		return s.Config.MCP.MaxResults
	}
	return asked
}

// emailOut is one message as the listing tools answer it.
type emailOut struct {
	EmailID     string     `json:"email_id" jsonschema:"the message's stable id: pass it to get_email, get_thread and the change tools"`
	Account     string     `json:"account"`
	Alias       string     `json:"alias" jsonschema:"the folder alias the message is in"`
	Subject     string     `json:"subject"`
	From        string     `json:"from" jsonschema:"the first From address"`
	FromName    string     `json:"from_name,omitempty"`
	SentAt      *time.Time `json:"sent_at,omitempty" jsonschema:"the message's Date header"`
	ReceivedAt  time.Time  `json:"received_at" jsonschema:"when it was received: the listing's order"`
	Unread      bool       `json:"unread" jsonschema:"as last observed on the server"`
	Flagged     bool       `json:"flagged" jsonschema:"as last observed on the server"`
	Attachments int        `json:"attachments" jsonschema:"how many attachments it has"`
	Labels      []string   `json:"labels,omitempty" jsonschema:"the server's labels of the message (Gmail), as last observed"`
	// Score is a search's, comparable within one answer only.
	Score *float64 `json:"score,omitempty" jsonschema:"the search's relevance, comparable within one answer only"`
}

func emailOf(e mailstore.EmailSummary) emailOut {
	return emailOut{
		EmailID: e.ID.String(), Account: e.Account, Alias: e.Alias, Subject: e.Subject, From: e.From, FromName: e.FromName,
		SentAt: e.SentAt, ReceivedAt: e.ReceivedAt.UTC(), Unread: e.Unread, Flagged: e.Flagged, Attachments: e.Attachments,
		Labels: e.Labels,
	}
}

type listEmailsIn struct {
	filters
	Limit  int    `json:"limit,omitempty" jsonschema:"at most this many messages (default and upper bound: the server's MAILFATHOM_MCP_MAX_RESULTS)"`
	Cursor string `json:"cursor,omitempty" jsonschema:"next_cursor of the previous page, to continue the listing"`
}

type listEmailsOut struct {
	Emails []emailOut `json:"emails"`
	// NextCursor continues the listing; empty on its last page.
	NextCursor string `json:"next_cursor,omitempty" jsonschema:"pass as cursor, with the same filters, for the next page; absent on the last page"`
}

type emailIDIn struct {
	EmailID string `json:"email_id" jsonschema:"the message's id, as the listing and search tools answer it"`
}

type getEmailIn struct {
	emailIDIn
	MaxCharacters int `json:"max_characters,omitempty" jsonschema:"at most this many characters of body text (default and upper bound: the server's MAILFATHOM_MCP_MAX_CHARACTERS)"`
}

type participantOut struct {
	Role    string `json:"role" jsonschema:"Sender, From, ReplyTo, To, Cc or Bcc"`
	Address string `json:"address"`
	Name    string `json:"name,omitempty"`
}

type attachmentOut struct {
	FileName  string `json:"file_name,omitempty" jsonschema:"the attachment's name, sanitized"`
	MediaType string `json:"media_type"`
	Bytes     int64  `json:"bytes" jsonschema:"its decoded size"`
	Inline    bool   `json:"inline,omitempty"`
}

type getEmailOut struct {
	emailOut
	MessageID      string           `json:"message_id,omitempty"`
	InReplyTo      []string         `json:"in_reply_to"`
	Participants   []participantOut `json:"participants"`
	AttachmentList []attachmentOut  `json:"attachment_list" jsonschema:"what the attachments are; their content is never answered"`
	// Body is the trimmed body text, at most MaxCharacters characters.
	Body           string `json:"body" jsonschema:"the body text, without quoted history and signatures"`
	BodyCharacters int    `json:"body_characters" jsonschema:"the length of the whole trimmed body text, in characters"`
	BodyTruncated  bool   `json:"body_truncated" jsonschema:"true when body holds less than the whole text"`
	TextSource     string `json:"text_source" jsonschema:"PlainText, HtmlDerived, Encrypted, NoTextualBody or NotExtracted"`
	Lossy          bool   `json:"lossy" jsonschema:"true when the text was derived from HTML and lost structure (tables, images, layout)"`
	Content        string `json:"content_availability" jsonschema:"Available, or why the content is not stored (ExceededSizeLimit, NotFetched, ...)"`
}

type getThreadOut struct {
	Emails    []emailOut `json:"emails" jsonschema:"the conversation's messages, oldest first"`
	Truncated bool       `json:"truncated"`
}

func (s *server) addEmailTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:  "list_emails",
		Title: "List emails",
		Description: "Lists stored messages newest first, narrowed by account, folder alias, received or sent time, sender, recipient, " +
			"attachments, unread or flagged state and server label (Gmail). Continue with next_cursor until it is absent; every message appears once.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.listEmails)
	addTool(s, srv, &mcp.Tool{
		Name:        "get_email",
		Title:       "Read an email",
		Description: "Reads one message: its headers, participants, what its attachments are, and its body text trimmed of quoted history, up to max_characters.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.getEmail)
	addTool(s, srv, &mcp.Tool{
		Name:        "get_thread",
		Title:       "Read a conversation",
		Description: "Lists the messages of the conversation a message belongs to, oldest first: the server's thread where the server names one (Gmail), else by Message-ID, In-Reply-To and References.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.getThread)
}

func (s *server) listEmails(ctx context.Context, in listEmailsIn) (listEmailsOut, int, error) {
	f, err := s.emailFilter(ctx, in.filters)
	if err != nil {
		return listEmailsOut{}, 0, err
	}
	var after *mailstore.EmailCursor
	if in.Cursor != "" {
		c, ok := decodeCursor(in.Cursor)
		if !ok {
			return listEmailsOut{}, 0, refusef("cursor is not a next_cursor this server answered")
		}
		after = &c
	}
	limit := s.limit(in.Limit)
	list, err := mailstore.ListEmails(ctx, s.Pool, f, after, limit+1)
	if err != nil {
		return listEmailsOut{}, 0, err
	}
	out := listEmailsOut{Emails: []emailOut{}}
	if len(list) > limit {
		list = list[:limit]
		last := list[limit-1]
		out.NextCursor = encodeCursor(mailstore.EmailCursor{Received: last.ReceivedAt, ID: last.ID})
	}
	for _, e := range list {
		out.Emails = append(out.Emails, emailOf(e))
	}
	return out, len(out.Emails), nil
}

// encodeCursor writes c as an opaque token.
func encodeCursor(c mailstore.EmailCursor) string {
	return base64.RawURLEncoding.EncodeToString(fmt.Appendf(nil, "%d|%s", c.Received.UnixMicro(), c.ID))
}

func decodeCursor(token string) (mailstore.EmailCursor, bool) {
	raw, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return mailstore.EmailCursor{}, false
	}
	micros, id, ok := strings.Cut(string(raw), "|")
	if !ok {
		return mailstore.EmailCursor{}, false
	}
	var us int64
	if _, err := fmt.Sscanf(micros, "%d", &us); err != nil {
		return mailstore.EmailCursor{}, false
	}
	u, err := uuid.Parse(id)
	if err != nil {
		return mailstore.EmailCursor{}, false
	}
	return mailstore.EmailCursor{Received: time.UnixMicro(us), ID: u}, true
}

// emailID parses a caller's email id.
func emailID(v string) (uuid.UUID, error) {
	id, err := uuid.Parse(strings.TrimSpace(v))
	if err != nil {
		return uuid.UUID{}, refusef("email_id must be an id the listing or search tools answered")
	}
	return id, nil
}

// errNoEmail answers an id that names no served message.
var errNoEmail = refusef("no stored email has this email_id, or it is no longer served (moved, deleted, or of an account no longer configured)")

func (s *server) getEmail(ctx context.Context, in getEmailIn) (getEmailOut, int, error) {
	id, err := emailID(in.EmailID)
	if err != nil {
		return getEmailOut{}, 0, err
	}
	e, found, err := mailstore.ReadEmail(ctx, s.Pool, s.accounts, id)
	if err != nil {
		return getEmailOut{}, 0, err
	}
	if !found {
		return getEmailOut{}, 0, errNoEmail
	}
	out := getEmailOut{
		emailOut: emailOf(e.EmailSummary), MessageID: e.MessageID, InReplyTo: nonNil(e.InReplyTo),
		Participants: []participantOut{}, AttachmentList: []attachmentOut{},
		TextSource: e.TextSource, Lossy: e.Lossy && e.TextSource == "HtmlDerived", Content: e.Availability,
	}
	for _, p := range e.Participants {
		out.Participants = append(out.Participants, participantOut{Role: p.Role, Address: p.Address, Name: p.Name})
	}
	for _, a := range e.Attachments {
		out.AttachmentList = append(out.AttachmentList, attachmentOut{FileName: printable(a.FileName), MediaType: a.MediaType,
			Bytes: a.DecodedBytes, Inline: strings.EqualFold(a.Disposition, "inline")})
	}
	limit := in.MaxCharacters
	if limit <= 0 || limit > s.Config.MCP.MaxCharacters {
		limit = s.Config.MCP.MaxCharacters
	}
	out.BodyCharacters = utf8.RuneCountInString(e.Body)
	out.Body = e.Body
	if out.BodyCharacters > limit {
		out.Body = string([]rune(e.Body)[:limit])
		out.BodyTruncated = true
	}
	out.BodyTruncated = out.BodyTruncated || e.Truncated
	return out, 1, nil
}

func (s *server) getThread(ctx context.Context, in emailIDIn) (getThreadOut, int, error) {
	id, err := emailID(in.EmailID)
	if err != nil {
		return getThreadOut{}, 0, err
	}
	limit := s.Config.MCP.MaxResults
	list, found, err := mailstore.ReadThread(ctx, s.Pool, s.accounts, id, limit+1)
	if err != nil {
		return getThreadOut{}, 0, err
	}
	if !found {
		return getThreadOut{}, 0, errNoEmail
	}
	out := getThreadOut{Emails: []emailOut{}}
	if len(list) > limit {
		list, out.Truncated = list[:limit], true
	}
	for _, e := range list {
		out.Emails = append(out.Emails, emailOf(e))
	}
	return out, len(out.Emails), nil
}

// printable keeps an untrusted name on one line: control characters
// become spaces.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return ' '
		}
		return r
	}, s)
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
