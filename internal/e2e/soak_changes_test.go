package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os/exec"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/mailfathom/mailfathom/internal/testharness/dbassert"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// askedChange is one change asked of MailFathom, and what became of the
// asking.
type askedChange struct {
	kind      string // move, copy, delete, mark-read, mark-unread
	account   *soakAccount
	emailID   string
	messageID string
	// source and dest are the folder aliases; dest only for move and copy.
	source, dest string
	requestID    string
	// via names the surfaces it was asked through, in order.
	via []string
	// mutationIDs are the ids the askings answered; one change asked
	// several times under one request id answers one id.
	mutationIDs []string
	// racing marks a change the other client raced on the same message
	// on purpose: its end state on the server is the race's, so only its
	// record and its uniqueness are judged.
	racing bool
}

// askChanges asks MailFathom for a change every 1 to 3 s, through the
// command line, the HTTP API or MCP in turn, until ctx ends or the last
// quarter of the run begins (changes need the quiet period to settle).
// One change in four is asked again under the same request id, up to
// three times, through another surface; one in eight races the other
// client on the same message.
func (s *soak) askChanges(ctx context.Context) {
	surfaces := []string{"cli", "api", "mcp"}
	for i := 0; ctx.Err() == nil && s.elapsed() < s.duration*3/4; i++ {
		sleepCtx(ctx, s.between(time.Second, 3*time.Second))
		ch := s.pickChange()
		if ch == nil {
			continue
		}
		times := 1
		if s.intn(4) == 0 {
			times = 2 + s.intn(2)
		}
		ch.racing = s.intn(8) == 0
		for k := range times {
			via := surfaces[(i+k)%len(surfaces)]
			id, err := s.ask(ctx, via, ch)
			s.counts.asks.Add(1)
			if err != nil {
				s.counts.askErrors.Add(1)
				continue
			}
			s.event("asked %s of %s/%s %s %s via %s under %s: mutation %s", ch.kind, ch.account.id, ch.source, ch.emailID, ch.messageID, via, ch.requestID, id)
			ch.via = append(ch.via, via)
			ch.mutationIDs = append(ch.mutationIDs, id)
			if k == 0 && ch.racing {
				s.race(ch)
			}
		}
		if len(ch.mutationIDs) > 0 {
			s.changeMu.Lock()
			s.changes = append(s.changes, ch)
			s.changeMu.Unlock()
		}
	}
}

// pickChange chooses a served message no other change claimed, outside
// any folder the soak recreates, claims it, and draws what to ask of it.
func (s *soak) pickChange() *askedChange {
	a := s.accounts[s.intn(len(s.accounts))]
	// Asked from the asking goroutine, so it reads what fails no test.
	stored, err := dbassert.ReadOccurrences(context.Background(), s.b.pool, "")
	if err != nil {
		return nil
	}
	type candidate struct{ id, messageID, alias string }
	var cands []candidate
	for _, o := range stored {
		if o.Account == a.id && o.Served && o.Availability == "Available" && o.MessageID != "" {
			cands = append(cands, candidate{o.ID.String(), o.MessageID, strings.ToLower(o.Alias)})
		}
	}
	var usable []candidate
	for _, c := range cands {
		if path := a.path(c.alias); path != "" && path != a.recreate && !s.isClaimed("<"+c.messageID+">") {
			usable = append(usable, c)
		}
	}
	if len(usable) == 0 {
		return nil
	}
	c := usable[s.intn(len(usable))]
	ch := &askedChange{
		kind: []string{"move", "copy", "delete", "mark-read", "mark-unread"}[s.intn(5)], account: a,
		emailID: c.id, messageID: "<" + c.messageID + ">", source: c.alias,
		requestID: fmt.Sprintf("soak-%d-%d", s.seed, s.nextMessage.Add(1)),
	}
	if ch.kind == "move" || ch.kind == "copy" {
		var dests []string
		for _, f := range a.folders {
			if f.alias != c.alias && f.remotePath != a.recreate {
				dests = append(dests, f.alias)
			}
		}
		ch.dest = dests[s.intn(len(dests))]
	}
	s.claim(ch.messageID)
	return ch
}

// path returns the remote path of a's alias, "" for none.
func (a *soakAccount) path(alias string) string {
	for _, f := range a.folders {
		if strings.EqualFold(f.alias, alias) {
			return f.remotePath
		}
	}
	return ""
}

// race acts on ch's message from the other client right after ch was
// asked: the opposite read mark for a read mark, an expunge for a move or
// a delete, a flag for a copy.
func (s *soak) race(ch *askedChange) {
	path := ch.account.path(ch.source)
	switch ch.kind {
	case "mark-read":
		_ = s.outsideFlag(ch.account, path, imap.FlagSeen, false, ch.messageID)
	case "mark-unread":
		_ = s.outsideFlag(ch.account, path, imap.FlagSeen, true, ch.messageID)
	case "move", "delete":
		_ = s.outsideExpunge(ch.account, path, ch.messageID)
	case "copy":
		_ = s.outsideFlag(ch.account, path, imap.FlagFlagged, true, ch.messageID)
	}
}

// ask asks for ch once through via and returns the mutation id answered.
func (s *soak) ask(ctx context.Context, via string, ch *askedChange) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	switch via {
	case "cli":
		args := []string{"mutate", "-request-id", ch.requestID, ch.kind, ch.emailID}
		if ch.dest != "" {
			args = append(args, ch.dest)
		}
		cmd := exec.CommandContext(ctx, s.bin, args...)
		cmd.Env = fromEnv(s.b.env)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("mutate: %w: %s", err, out)
		}
		f := strings.Fields(string(out))
		if len(f) == 0 {
			return "", fmt.Errorf("mutate printed nothing")
		}
		return f[0], nil
	case "api":
		p := s.replica(s.intn(2))
		addr, ok := addrOf(p)
		if !ok {
			return "", fmt.Errorf("no replica serving")
		}
		body, _ := json.Marshal(map[string]string{"email_id": ch.emailID, "kind": ch.kind, "destination_alias": ch.dest, "request_id": ch.requestID})
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/api/v1/mutations", bytes.NewReader(body))
		if err != nil {
			return "", err
		}
		req.SetBasicAuth(s.uiUser, s.uiPass)
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return "", err
		}
		defer resp.Body.Close()
		var answer struct {
			ID string `json:"id"`
		}
		if resp.StatusCode/100 != 2 {
			return "", fmt.Errorf("POST /api/v1/mutations: %s", resp.Status)
		}
		if err := json.NewDecoder(resp.Body).Decode(&answer); err != nil || answer.ID == "" {
			return "", fmt.Errorf("POST /api/v1/mutations answered no id: %v", err)
		}
		return answer.ID, nil
	case "mcp":
		p := s.replica(s.intn(2))
		addr, ok := addrOf(p)
		if !ok {
			return "", fmt.Errorf("no replica serving")
		}
		cs, err := mcp.NewClient(&mcp.Implementation{Name: "mailfathom-soak", Version: "1"}, nil).Connect(ctx, &mcp.StreamableClientTransport{
			Endpoint:             "http://" + addr + "/mcp",
			HTTPClient:           &http.Client{Transport: basicAuth{s.uiUser, s.uiPass}},
			DisableStandaloneSSE: true,
		}, nil)
		if err != nil {
			return "", err
		}
		defer cs.Close()
		tool := map[string]string{"move": "move_email", "copy": "copy_email", "delete": "delete_email", "mark-read": "mark_read", "mark-unread": "mark_unread"}[ch.kind]
		args := map[string]any{"email_id": ch.emailID, "request_id": ch.requestID}
		if ch.dest != "" {
			args["destination_alias"] = ch.dest
		}
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if err != nil {
			return "", err
		}
		if res.IsError {
			return "", fmt.Errorf("%s refused: %s", tool, mcpText(res))
		}
		var out struct {
			ID string `json:"id"`
		}
		raw, _ := json.Marshal(res.StructuredContent)
		if err := json.Unmarshal(raw, &out); err != nil || out.ID == "" {
			return "", fmt.Errorf("%s answered no mutation id: %s", tool, raw)
		}
		return out.ID, nil
	}
	return "", fmt.Errorf("unknown surface %q", via)
}

// addrOf returns the HTTP address p serves on, once it logged it.
func addrOf(p *serveProc) (string, bool) {
	if p == nil || !p.running() {
		return "", false
	}
	for _, l := range p.logLines() {
		if l.msg() == "serving" {
			if a, ok := l["addr"].(string); ok {
				return a, true
			}
		}
	}
	return "", false
}
