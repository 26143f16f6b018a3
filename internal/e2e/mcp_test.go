package e2e

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/google/uuid"
	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/capture"
	"github.com/mailfathom/mailfathom/internal/testharness/embedtest"
	"github.com/mailfathom/mailfathom/internal/testharness/pgtest"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

const (
	mcpCrane = "From: Harbour Master <master@example.test>\r\n" +
		"To: Dock Office <office@example.test>\r\n" +
		"Subject: Crane inspection report\r\n" +
		"Message-ID: <crane-mcp@example.test>\r\n" +
		"Date: Tue, 03 Jun 2025 09:00:00 +0000\r\n" +
		"MIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=\"b1\"\r\n\r\n" +
		"--b1\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" +
		"The inspectors examined both harbour cranes and found the winches worn.\r\n" +
		"--b1\r\nContent-Type: application/pdf\r\n" +
		"Content-Disposition: attachment; filename=\"winch-survey.pdf\"\r\n" +
		"Content-Transfer-Encoding: base64\r\n\r\nJVBERi0xLjQK\r\n--b1--\r\n"
	mcpReply = "From: Dock Office <office@example.test>\r\n" +
		"To: Harbour Master <master@example.test>\r\n" +
		"Subject: Re: Crane inspection report\r\n" +
		"Message-ID: <crane-reply-mcp@example.test>\r\n" +
		"In-Reply-To: <crane-mcp@example.test>\r\n" +
		"References: <crane-mcp@example.test>\r\n" +
		"Date: Wed, 04 Jun 2025 10:00:00 +0000\r\n" +
		"Content-Type: text/plain; charset=utf-8\r\n\r\n" +
		"We will replace the crane winches next week.\r\n"
	mcpTides = "From: Tide Office <tides@example.test>\r\n" +
		"To: Dock Office <office@example.test>\r\n" +
		"Subject: Quarterly tide tables\r\n" +
		"Date: Thu, 05 Jun 2025 08:00:00 +0000\r\n" +
		"Content-Type: text/html; charset=utf-8\r\n\r\n" +
		"<html><body><h1>Tide tables</h1><table><tr><td>High water at dawn</td></tr></table></body></html>\r\n"
)

// mcpEmail is one message of a listing tool's answer.
type mcpEmail struct {
	EmailID     string    `json:"email_id"`
	Account     string    `json:"account"`
	Alias       string    `json:"alias"`
	Subject     string    `json:"subject"`
	From        string    `json:"from"`
	ReceivedAt  time.Time `json:"received_at"`
	Unread      bool      `json:"unread"`
	Flagged     bool      `json:"flagged"`
	Attachments int       `json:"attachments"`
}

type mcpEmails struct {
	Mode       string     `json:"mode"`
	Emails     []mcpEmail `json:"emails"`
	NextCursor string     `json:"next_cursor"`
}

type mcpMutation struct {
	ID          string `json:"id"`
	State       string `json:"state"`
	Kind        string `json:"kind"`
	RequestID   string `json:"request_id"`
	Created     bool   `json:"created"`
	FailureCode string `json:"failure_code"`
}

// mcpCall calls a tool that must succeed and decodes its structured answer.
func mcpCall[Out any](t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) Out {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, tool)
	require.False(t, res.IsError, "%s: %s", tool, mcpText(res))
	raw, err := json.Marshal(res.StructuredContent)
	require.NoError(t, err)
	var out Out
	require.NoError(t, json.Unmarshal(raw, &out), tool)
	return out
}

// mcpRefused calls a tool that must answer a tool error (not a protocol
// failure) and returns its text.
func mcpRefused(t *testing.T, cs *mcp.ClientSession, tool string, args map[string]any) string {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: tool, Arguments: args})
	require.NoError(t, err, "%s: a tool error, not a protocol failure", tool)
	require.True(t, res.IsError, "%s %v answered without an error", tool, args)
	return mcpText(res)
}

func mcpText(res *mcp.CallToolResult) string {
	var b strings.Builder
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			b.WriteString(tc.Text)
		}
	}
	return b.String()
}

// basicAuth adds basic credentials to every request.
type basicAuth struct{ user, password string }

func (a basicAuth) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	r.SetBasicAuth(a.user, a.password)
	return http.DefaultTransport.RoundTrip(r)
}

// TestMCP synchronizes a small mailbox from Dovecot with an embedding
// profile and drives every tool through an MCP client of the same SDK,
// over `mailfathom mcp` (the real binary, on stdio) and over serve's /mcp:
// the listings, the pagination, search in each mode, mail similar to a
// message, reading a message and
// its conversation, each tool's errors, and the changes, a move asked
// three times under one request id moving the message on the server once.
// /mcp refuses a caller without River UI's password or naming another
// host on the loopback address, and nothing of the
// mail asked for or answered reaches the logs, the metrics or the jobs.
func TestMCP(t *testing.T) {
	t.Parallel()
	b := setup(t, pgtest.Database(t))
	u := b.server.NewUser()
	u.CreateFolder("Filed")
	seedCorpus(t, u, "INBOX", 8, 51, 8)
	u.Append("INBOX", []byte(mcpCrane), time.Date(2025, 6, 3, 9, 1, 0, 0, time.UTC))
	reply := u.Append("INBOX", []byte(mcpReply), time.Date(2025, 6, 4, 10, 1, 0, 0, time.UTC), imap.FlagSeen, imap.FlagFlagged)
	u.Append("INBOX", []byte(mcpTides), time.Date(2025, 6, 5, 8, 1, 0, 0, time.UTC))
	const total = 11
	b.addAccount(t, "primary", u, folderMapping{"inbox", "INBOX"}, folderMapping{"filed", "Filed"}, folderMapping{"later", "NotYetCreated"})
	b.withEmbedding(t, embedtest.Options{})
	uiPw := filepath.Join(b.dir, "ui-password")
	require.NoError(t, os.WriteFile(uiPw, []byte("mcp-ui-password"), 0o600))
	b.env["MAILFATHOM_UI_ENABLED"] = "true"
	b.env["MAILFATHOM_UI_PASSWORD"] = "file:" + uiPw
	b.env["MAILFATHOM_MCP_MAX_RESULTS"] = "4"
	b.env["MAILFATHOM_MCP_MAX_CHARACTERS"] = "500"

	p := b.start(t, "serve")
	b.waitSynced(t, p, total, 2*time.Minute)
	b.waitEmbedded(t, p, 2*time.Minute)
	addr := p.addr(t)

	ctx := t.Context()
	impl := &mcp.Implementation{Name: "mailfathom-e2e", Version: "1"}
	httpSession, err := mcp.NewClient(impl, nil).Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:             "http://" + addr + "/mcp",
		HTTPClient:           &http.Client{Transport: basicAuth{"admin", "mcp-ui-password"}},
		DisableStandaloneSSE: true,
	}, nil)
	require.NoError(t, err)
	defer httpSession.Close()

	cmd := exec.Command(binary(t), "mcp")
	cmd.Env = fromEnv(b.env)
	var stdioLog capture.Buffer
	cmd.Stderr = &stdioLog
	stdioSession, err := mcp.NewClient(impl, nil).Connect(ctx, &mcp.CommandTransport{Command: cmd}, nil)
	require.NoError(t, err, "stderr:\n%s", stdioLog.String())

	sessions := map[string]*mcp.ClientSession{"stdio": stdioSession, "http": httpSession}

	t.Run("Reads", func(t *testing.T) {
		for name, cs := range sessions {
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				mcpReads(t, cs, total)
			})
		}
	})

	// The mail to change, found through the tools.
	crane := mcpCall[mcpEmails](t, httpSession, "search_emails", map[string]any{"query": "winches worn", "mode": "lexical"}).Emails[0]
	inbox := mcpCall[mcpEmails](t, httpSession, "list_emails", map[string]any{"from": "sender", "limit": 4}).Emails
	require.Len(t, inbox, 4)
	flagged := mcpCall[mcpEmails](t, httpSession, "list_emails", map[string]any{"flagged": true}).Emails
	require.Len(t, flagged, 1)

	t.Run("Changes", func(t *testing.T) {
		move := map[string]any{"email_id": inbox[0].EmailID, "destination_alias": "filed", "request_id": "assistant-move-1"}
		first := mcpCall[mcpMutation](t, httpSession, "move_email", move)
		require.True(t, first.Created)
		require.Equal(t, "move", first.Kind)
		require.Equal(t, "assistant-move-1", first.RequestID)
		again := mcpCall[mcpMutation](t, stdioSession, "move_email", move)
		require.Equal(t, first.ID, again.ID, "the same request is the same change, whichever transport carries it")
		require.False(t, again.Created)

		copied := mcpCall[mcpMutation](t, stdioSession, "copy_email", map[string]any{"email_id": inbox[1].EmailID, "destination_alias": "FILED"})
		read := mcpCall[mcpMutation](t, httpSession, "mark_read", map[string]any{"email_id": inbox[2].EmailID})
		unread := mcpCall[mcpMutation](t, stdioSession, "mark_unread", map[string]any{"email_id": flagged[0].EmailID})
		deleted := mcpCall[mcpMutation](t, httpSession, "delete_email", map[string]any{"email_id": inbox[3].EmailID})
		_, err := uuid.Parse(deleted.RequestID)
		require.NoError(t, err, "a request id is generated and answered when none is given")

		for _, m := range []mcpMutation{first, copied, read, unread, deleted} {
			var state string
			poll.Every(t, 100*time.Millisecond, 2*time.Minute, fmt.Sprintf("the %s completes", m.Kind), func() bool {
				state = mcpCall[mcpMutation](t, httpSession, "get_mutation", map[string]any{"mutation_id": m.ID}).State
				return state == "completed"
			}, func() string { return state + "; log:\n" + tailLines(p.rawLog(), 30) })
		}
		// Asked a third time once done, the move is still the one change.
		third := mcpCall[mcpMutation](t, stdioSession, "move_email", move)
		require.Equal(t, first.ID, third.ID)
		require.Equal(t, "completed", third.State)

		inboxUIDs, filedUIDs := u.UIDs("INBOX"), u.UIDs("Filed")
		require.Len(t, filedUIDs, 2, "the moved message once and the copy")
		require.Len(t, inboxUIDs, total-2, "the moved and the deleted messages left the inbox")
		require.NotContains(t, u.Flags("INBOX", reply), imap.FlagSeen)

		// What a change made unserved is gone from the tools too.
		refusal := mcpRefused(t, httpSession, "get_email", map[string]any{"email_id": inbox[3].EmailID})
		require.Contains(t, refusal, "no longer served")

		for _, tc := range []struct {
			tool   string
			args   map[string]any
			reason string
		}{
			{"move_email", map[string]any{"email_id": crane.EmailID, "destination_alias": "inbox"}, "DestinationIsSource"},
			{"move_email", map[string]any{"email_id": crane.EmailID, "destination_alias": "nowhere"}, "DestinationAliasUnknown"},
			{"move_email", map[string]any{"email_id": crane.EmailID, "destination_alias": "later"}, "DestinationAliasUnresolved"},
			{"copy_email", map[string]any{"email_id": crane.EmailID}, "destination_alias"},
			{"delete_email", map[string]any{"email_id": crane.EmailID, "request_id": "assistant-move-1"}, "RequestIdReused"},
			{"mark_read", map[string]any{"email_id": uuid.NewString()}, "EmailUnknown"},
			{"mark_read", map[string]any{"email_id": "not-an-id"}, "email_id must be"},
			{"get_mutation", map[string]any{"mutation_id": uuid.NewString()}, "no change has this mutation_id"},
		} {
			require.Contains(t, mcpRefused(t, stdioSession, tc.tool, tc.args), tc.reason, "%s %v", tc.tool, tc.args)
		}
	})

	t.Run("HTTPNeedsThePasswordAndALoopbackHost", func(t *testing.T) {
		for _, auth := range []*basicAuth{nil, {"admin", "wrong"}} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp",
				strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
			require.NoError(t, err)
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			if auth != nil {
				req.SetBasicAuth(auth.user, auth.password)
			}
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
			require.Equal(t, http.StatusUnauthorized, resp.StatusCode)
		}
		// A page that rebinds a name to the loopback address is refused,
		// credentials or not.
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/mcp",
			strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`))
		require.NoError(t, err)
		req.Host = "mail.example.test"
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		req.SetBasicAuth("admin", "mcp-ui-password")
		resp, err := http.DefaultClient.Do(req)
		require.NoError(t, err)
		resp.Body.Close()
		require.Equal(t, http.StatusForbidden, resp.StatusCode)
	})

	require.NoError(t, stdioSession.Close())
	require.NotNil(t, cmd.ProcessState)
	require.Equal(t, 0, cmd.ProcessState.ExitCode(), "mailfathom mcp ends cleanly when the client closes stdin:\n%s", stdioLog.String())
	metrics := mcpGet(t, "http://"+addr+"/metrics")
	require.Contains(t, metrics, `mailfathom_mcp_tool_calls_total{outcome="ok",tool="search_emails",transport="http"}`)
	p.stop(t)

	// Every call is logged by tool, transport, count and duration; nothing
	// of the mail asked for or answered is anywhere.
	require.Positive(t, p.count("mcp tool call", "tool", "get_email", "transport", "http"))
	require.Contains(t, stdioLog.String(), `"transport":"stdio"`)
	require.Contains(t, stdioLog.String(), `"tool":"search_emails"`)
	var sw capture.Sweep
	sw.Add("serve log", p.rawLog())
	sw.Add("mcp log", stdioLog.String())
	sw.Add("metrics", metrics)
	sw.Add("jobs", b.jobText(t))
	sw.RequireNone(t, "Crane inspection", "master@example.test", "office@example.test", "sender1@example.test",
		"winch-survey", "winches", "inspecting cranes", "harbour", "Harbour", "Tide tables", "High water", "assistant-move-1")
}

// mcpReads exercises every read tool and its errors over cs, against a
// mailbox of total messages not yet changed.
func mcpReads(t *testing.T, cs *mcp.ClientSession, total int) {
	type account struct {
		ID           string   `json:"id"`
		Folders      []string `json:"folders"`
		StoredEmails int      `json:"stored_emails"`
	}
	accounts := mcpCall[struct {
		Accounts []account `json:"accounts"`
	}](t, cs, "list_accounts", nil).Accounts
	require.Len(t, accounts, 1)
	require.Equal(t, "primary", accounts[0].ID)
	require.Equal(t, []string{"INBOX", "FILED", "LATER"}, accounts[0].Folders)
	require.Equal(t, total, accounts[0].StoredEmails)

	type folder struct {
		Alias         string     `json:"alias"`
		EffectiveMode string     `json:"effective_mode"`
		Bound         bool       `json:"bound"`
		StoredEmails  int        `json:"stored_emails"`
		LastSuccessAt *time.Time `json:"last_success_at"`
	}
	folders := mcpCall[struct {
		Folders []folder `json:"folders"`
	}](t, cs, "list_folders", map[string]any{"account": "Primary"}).Folders
	require.Len(t, folders, 3)
	require.Equal(t, "INBOX", folders[0].Alias)
	require.Equal(t, total, folders[0].StoredEmails)
	require.NotNil(t, folders[0].LastSuccessAt)
	require.Equal(t, "Polling", folders[0].EffectiveMode)
	require.False(t, folders[2].Bound)
	require.Contains(t, mcpRefused(t, cs, "list_folders", map[string]any{"account": "nobody"}), "not a configured account")

	// Pages of at most MAILFATHOM_MCP_MAX_RESULTS, newest first, every
	// message once.
	var all []mcpEmail
	cursor := ""
	for pages := 0; ; pages++ {
		require.Less(t, pages, total, "the pagination does not end")
		args := map[string]any{"limit": 100}
		if cursor != "" {
			args["cursor"] = cursor
		}
		page := mcpCall[mcpEmails](t, cs, "list_emails", args)
		require.LessOrEqual(t, len(page.Emails), 4, "the limit asked is bounded by the setting")
		all = append(all, page.Emails...)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	require.Len(t, all, total)
	ids := map[string]bool{}
	for i, e := range all {
		require.False(t, ids[e.EmailID], "%s listed twice", e.EmailID)
		ids[e.EmailID] = true
		if i > 0 {
			require.False(t, e.ReceivedAt.After(all[i-1].ReceivedAt), "newest first")
		}
	}
	byID := func(list []mcpEmail) []string {
		out := []string{}
		for _, e := range list {
			out = append(out, e.Subject)
		}
		slices.Sort(out)
		return out
	}
	var withAttachments []mcpEmail
	for _, e := range all {
		if e.Attachments > 0 {
			withAttachments = append(withAttachments, e)
		}
	}
	require.NotEmpty(t, withAttachments)
	require.Equal(t, byID(withAttachments[:min(4, len(withAttachments))]),
		byID(mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"has_attachment": true}).Emails))
	require.Equal(t, []string{"Re: Crane inspection report"}, byID(mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"flagged": true}).Emails))
	require.Equal(t, []string{"Re: Crane inspection report"}, byID(mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"unread": false}).Emails))
	require.Equal(t, []string{"Crane inspection report"}, byID(mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"from": "HARBOUR master"}).Emails))
	require.Equal(t, []string{"Re: Crane inspection report"}, byID(mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"to": "master@"}).Emails))
	require.Equal(t, []string{"Quarterly tide tables", "Re: Crane inspection report"},
		byID(mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"sent_since": "2025-06-04", "sent_until": "2025-06-06T00:00:00Z"}).Emails))
	require.Empty(t, mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"received_since": "2100-01-01"}).Emails)
	require.Empty(t, mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"alias": "filed"}).Emails)
	require.Empty(t, mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"from": "%"}).Emails, "a wildcard is matched as itself")
	require.Len(t, mcpCall[mcpEmails](t, cs, "list_emails", map[string]any{"alias": "Inbox", "account": "primary", "limit": 2}).Emails, 2)
	for _, tc := range []struct {
		args map[string]any
		want string
	}{
		{map[string]any{"account": "nobody"}, "not a configured account"},
		{map[string]any{"alias": "nowhere"}, "not a configured folder alias"},
		{map[string]any{"alias": "later"}, "has not been resolved"},
		{map[string]any{"cursor": "bm90IGEgY3Vyc29y"}, "cursor"},
		{map[string]any{"received_since": "last week"}, "received_since must be"},
	} {
		require.Contains(t, mcpRefused(t, cs, "list_emails", tc.args), tc.want, "%v", tc.args)
	}

	// Search in each mode, and narrowed by the listing's filters.
	lexical := mcpCall[mcpEmails](t, cs, "search_emails", map[string]any{"query": "winches", "mode": "lexical"})
	require.Equal(t, "lexical", lexical.Mode)
	require.Equal(t, []string{"Crane inspection report", "Re: Crane inspection report"}, byID(lexical.Emails))
	require.Equal(t, []string{"Re: Crane inspection report"},
		byID(mcpCall[mcpEmails](t, cs, "search_emails", map[string]any{"query": "winches", "mode": "lexical", "flagged": true}).Emails))
	require.Empty(t, mcpCall[mcpEmails](t, cs, "search_emails", map[string]any{"query": "inspecting cranes", "mode": "lexical"}).Emails)
	for _, mode := range []string{"semantic", "hybrid", ""} {
		found := mcpCall[mcpEmails](t, cs, "search_emails", map[string]any{"query": "inspecting cranes", "mode": mode})
		require.Contains(t, byID(found.Emails), "Crane inspection report", mode)
		require.Equal(t, cmp.Or(mode, "hybrid"), found.Mode)
	}
	require.Contains(t, mcpRefused(t, cs, "search_emails", map[string]any{"query": "  "}), "query is required")
	require.Contains(t, mcpRefused(t, cs, "search_emails", map[string]any{"query": "crane", "mode": "fuzzy"}), "lexical, semantic or hybrid")
	require.Contains(t, mcpRefused(t, cs, "search_emails", map[string]any{"query": "crane", "alias": "later"}), "has not been resolved")

	// One message, its body bounded, and its conversation.
	crane := lexical.Emails[slices.IndexFunc(lexical.Emails, func(e mcpEmail) bool { return e.Subject == "Crane inspection report" })]
	type email struct {
		Subject      string `json:"subject"`
		MessageID    string `json:"message_id"`
		Participants []struct {
			Role    string `json:"role"`
			Address string `json:"address"`
			Name    string `json:"name"`
		} `json:"participants"`
		Attachments []struct {
			FileName  string `json:"file_name"`
			MediaType string `json:"media_type"`
			Bytes     int64  `json:"bytes"`
		} `json:"attachment_list"`
		Body           string `json:"body"`
		BodyCharacters int    `json:"body_characters"`
		BodyTruncated  bool   `json:"body_truncated"`
		TextSource     string `json:"text_source"`
		Lossy          bool   `json:"lossy"`
	}
	got := mcpCall[email](t, cs, "get_email", map[string]any{"email_id": crane.EmailID})
	require.Equal(t, "Crane inspection report", got.Subject)
	require.Equal(t, "crane-mcp@example.test", strings.Trim(got.MessageID, "<>"))
	require.Equal(t, "From", got.Participants[0].Role)
	require.Equal(t, "master@example.test", got.Participants[0].Address)
	require.Equal(t, "Harbour Master", got.Participants[0].Name)
	require.Len(t, got.Attachments, 1)
	require.Equal(t, "winch-survey.pdf", got.Attachments[0].FileName)
	require.Equal(t, "application/pdf", got.Attachments[0].MediaType)
	require.Contains(t, got.Body, "found the winches worn")
	require.False(t, got.BodyTruncated)
	require.Equal(t, "PlainText", got.TextSource)
	require.False(t, got.Lossy)
	short := mcpCall[email](t, cs, "get_email", map[string]any{"email_id": crane.EmailID, "max_characters": 14})
	require.Equal(t, "The inspectors", short.Body)
	require.True(t, short.BodyTruncated)
	require.Equal(t, got.BodyCharacters, short.BodyCharacters)

	// The mail nearest the report in meaning, by its stored vectors, with
	// the listing's filters and bounds.
	similar := mcpCall[mcpEmails](t, cs, "find_similar_emails", map[string]any{"email_id": crane.EmailID})
	require.Len(t, similar.Emails, 4, "bounded by MAILFATHOM_MCP_MAX_RESULTS")
	require.Contains(t, byID(similar.Emails), "Re: Crane inspection report")
	for _, e := range similar.Emails {
		require.NotEqual(t, crane.EmailID, e.EmailID, "not the message itself")
	}
	require.Equal(t, []string{"Re: Crane inspection report"},
		byID(mcpCall[mcpEmails](t, cs, "find_similar_emails", map[string]any{"email_id": crane.EmailID, "flagged": true}).Emails))
	require.Contains(t, mcpRefused(t, cs, "find_similar_emails", map[string]any{"email_id": uuid.NewString()}), "no stored email has this email_id")
	require.Contains(t, mcpRefused(t, cs, "find_similar_emails", map[string]any{"email_id": crane.EmailID, "alias": "later"}), "has not been resolved")

	tides := mcpCall[mcpEmails](t, cs, "search_emails", map[string]any{"query": "tide", "mode": "lexical"}).Emails
	require.Len(t, tides, 1)
	html := mcpCall[email](t, cs, "get_email", map[string]any{"email_id": tides[0].EmailID})
	require.Equal(t, "HtmlDerived", html.TextSource)
	require.True(t, html.Lossy)
	require.Contains(t, html.Body, "High water at dawn")

	// Every configured character bound holds: a generated message is
	// longer than MAILFATHOM_MCP_MAX_CHARACTERS.
	long := mcpCall[email](t, cs, "get_email", map[string]any{"email_id": all[len(all)-1].EmailID, "max_characters": 100000})
	require.LessOrEqual(t, len([]rune(long.Body)), 500)

	thread := mcpCall[struct {
		Emails []mcpEmail `json:"emails"`
	}](t, cs, "get_thread", map[string]any{"email_id": crane.EmailID}).Emails
	require.Len(t, thread, 2)
	require.Equal(t, "Crane inspection report", thread[0].Subject, "oldest first")
	require.Equal(t, "Re: Crane inspection report", thread[1].Subject)

	for _, tool := range []string{"get_email", "get_thread"} {
		require.Contains(t, mcpRefused(t, cs, tool, map[string]any{"email_id": uuid.NewString()}), "no stored email has this email_id")
		require.Contains(t, mcpRefused(t, cs, tool, map[string]any{"email_id": "42"}), "email_id must be")
	}
}

func mcpGet(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	var b strings.Builder
	_, err = io.Copy(&b, resp.Body)
	require.NoError(t, err)
	return b.String()
}
