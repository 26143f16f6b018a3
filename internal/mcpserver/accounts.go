package mcpserver

import (
	"context"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/mailfathom/mailfathom/internal/config"
	"github.com/mailfathom/mailfathom/internal/status"
)

type listAccountsIn struct{}

// accountOut is one configured account as list_accounts answers it.
type accountOut struct {
	ID             string     `json:"id" jsonschema:"the account's configured id; pass it as account to the other tools"`
	ConfiguredMode string     `json:"configured_mode" jsonschema:"how the account is configured to learn of new mail: Polling or Push"`
	Folders        []string   `json:"folders" jsonschema:"the account's folder aliases"`
	StoredEmails   int        `json:"stored_emails" jsonschema:"messages stored across its folders"`
	LastSuccessAt  *time.Time `json:"last_success_at,omitempty" jsonschema:"when the most recently synchronized folder last completed a pass"`
	LastFailure    string     `json:"last_failure,omitempty" jsonschema:"the identity of the account's last failure, if any"`
}

type listAccountsOut struct {
	Accounts []accountOut `json:"accounts"`
}

type listFoldersIn struct {
	Account string `json:"account,omitempty" jsonschema:"only this account's folders (its id from list_accounts)"`
}

// folderOut is one configured folder alias as list_folders answers it.
type folderOut struct {
	Account       string     `json:"account"`
	Alias         string     `json:"alias" jsonschema:"the folder alias; pass it as alias or destination_alias to the other tools"`
	EffectiveMode string     `json:"effective_mode" jsonschema:"how the folder learns of new mail now: Push or Polling"`
	Bound         bool       `json:"bound" jsonschema:"whether the alias has been resolved to a folder on the server"`
	StoredEmails  int        `json:"stored_emails"`
	Tombstoned    int        `json:"tombstoned" jsonschema:"messages gone from the server, no longer served"`
	Oversized     int        `json:"oversized" jsonschema:"messages stored without their content, over the size bound"`
	LastPassAt    *time.Time `json:"last_pass_at,omitempty"`
	LastSuccessAt *time.Time `json:"last_success_at,omitempty" jsonschema:"when a pass last walked the folder to its end"`
	LastFailure   string     `json:"last_failure,omitempty"`
}

type listFoldersOut struct {
	Folders   []folderOut `json:"folders"`
	Truncated bool        `json:"truncated" jsonschema:"true when more folders exist than one answer holds"`
}

func (s *server) addAccountTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:        "list_accounts",
		Title:       "List mail accounts",
		Description: "Lists the configured mail accounts with their folder aliases, how many messages are stored and when they last synchronized.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.listAccounts)
	addTool(s, srv, &mcp.Tool{
		Name:        "list_folders",
		Title:       "List folders",
		Description: "Lists the configured folder aliases, of one account or all, with their synchronization mode, message counts and last successful pass.",
		Annotations: &mcp.ToolAnnotations{ReadOnlyHint: true},
	}, s.listFolders)
}

func (s *server) listAccounts(ctx context.Context, _ listAccountsIn) (listAccountsOut, int, error) {
	rep, err := status.Read(ctx, s.Pool, s.Status)
	if err != nil {
		return listAccountsOut{}, 0, err
	}
	out := listAccountsOut{Accounts: []accountOut{}}
	for _, a := range rep.Accounts {
		if len(out.Accounts) == s.Config.MCP.MaxResults {
			break
		}
		o := accountOut{ID: a.ID, ConfiguredMode: a.ConfiguredMode, Folders: []string{}}
		if a.LastFailure != nil {
			o.LastFailure = a.LastFailure.Identity
		}
		for _, f := range a.Folders {
			o.Folders = append(o.Folders, f.Alias)
			o.StoredEmails += f.Messages.Stored
			if f.LastSuccessAt != nil && (o.LastSuccessAt == nil || f.LastSuccessAt.After(*o.LastSuccessAt)) {
				o.LastSuccessAt = f.LastSuccessAt
			}
		}
		out.Accounts = append(out.Accounts, o)
	}
	return out, len(out.Accounts), nil
}

func (s *server) listFolders(ctx context.Context, in listFoldersIn) (listFoldersOut, int, error) {
	account, err := s.account(in.Account)
	if err != nil {
		return listFoldersOut{}, 0, err
	}
	rep, err := status.Read(ctx, s.Pool, s.Status)
	if err != nil {
		return listFoldersOut{}, 0, err
	}
	out := listFoldersOut{Folders: []folderOut{}}
	for _, a := range rep.Accounts {
		if account != "" && config.AccountKey(a.ID) != account {
			continue
		}
		for _, f := range a.Folders {
			if len(out.Folders) == s.Config.MCP.MaxResults {
				out.Truncated = true
				break
			}
			o := folderOut{
				Account: a.ID, Alias: f.Alias, EffectiveMode: f.EffectiveMode, Bound: f.Bound,
				StoredEmails: f.Messages.Stored, Tombstoned: f.Messages.Tombstoned, Oversized: f.Messages.Oversized,
				LastPassAt: f.LastPassAt, LastSuccessAt: f.LastSuccessAt,
			}
			if f.LastFailure != nil {
				o.LastFailure = f.LastFailure.Identity
			}
			out.Folders = append(out.Folders, o)
		}
	}
	return out, len(out.Folders), nil
}

// account returns the account key of id, "" for "", or a tool error
// naming the configured accounts when id is not one of them.
func (s *server) account(id string) (string, error) {
	if strings.TrimSpace(id) == "" {
		return "", nil
	}
	if _, ok := s.Config.Account(id); !ok {
		ids := make([]string, len(s.Config.Accounts))
		for i, a := range s.Config.Accounts {
			ids[i] = a.ID
		}
		return "", refusef("account %q is not a configured account; configured: %s (see list_accounts)", id, strings.Join(ids, ", "))
	}
	return config.AccountKey(id), nil
}
