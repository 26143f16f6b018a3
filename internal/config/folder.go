package config

import (
	"fmt"
	"strings"
)

// SpecialUse is a folder role a server advertises (RFC 6154), by the name
// configuration binds.
type SpecialUse string

// The folder roles.
const (
	SpecialUseInbox     SpecialUse = "Inbox"
	SpecialUseArchive   SpecialUse = "Archive"
	SpecialUseDrafts    SpecialUse = "Drafts"
	SpecialUseSent      SpecialUse = "Sent"
	SpecialUseJunk      SpecialUse = "Junk"
	SpecialUseTrash     SpecialUse = "Trash"
	SpecialUseAll       SpecialUse = "All"
	SpecialUseFlagged   SpecialUse = "Flagged"
	SpecialUseImportant SpecialUse = "Important"
)

// SpecialUses lists the roles in documentation order.
var SpecialUses = []SpecialUse{
	SpecialUseInbox, SpecialUseArchive, SpecialUseDrafts, SpecialUseSent, SpecialUseJunk,
	SpecialUseTrash, SpecialUseAll, SpecialUseFlagged, SpecialUseImportant,
}

// DefaultFolderAlias is the alias of the folder an account synchronizes when
// it configures none: the Inbox role.
const DefaultFolderAlias = "INBOX"

// Folder maps an alias, the stable operator-facing folder name, to exactly
// one of a remote path and a special-use role.
type Folder struct {
	// Alias is MAILFATHOM_ACCOUNTS_<i>_FOLDERS_<j>_ALIAS, trimmed and
	// upper-cased, unique within its account. Required.
	Alias string
	// RemotePath is MAILFATHOM_ACCOUNTS_<i>_FOLDERS_<j>_REMOTE_PATH, trimmed;
	// empty when SpecialUse is set.
	RemotePath string
	// SpecialUse is MAILFATHOM_ACCOUNTS_<i>_FOLDERS_<j>_SPECIAL_USE; empty
	// when RemotePath is set.
	SpecialUse SpecialUse
}

// DefaultFolders returns the folders of an account that configures none:
// alias INBOX on the Inbox role.
func DefaultFolders() []Folder {
	return []Folder{{Alias: DefaultFolderAlias, SpecialUse: SpecialUseInbox}}
}

// NormalizeAlias returns alias as configuration stores it: trimmed and
// upper-cased, so recasing an alias is not a second alias.
func NormalizeAlias(alias string) string { return strings.ToUpper(strings.TrimSpace(alias)) }

type rawFolder struct {
	Alias      string `env:"ALIAS"`
	RemotePath string `env:"REMOTE_PATH"`
	SpecialUse string `env:"SPECIAL_USE"`
}

func folderVar(i, j int, name string) string {
	return accountVar(i, fmt.Sprintf("FOLDERS_%d_%s", j, name))
}

// convertFolders converts account i's folders, applying the default when it
// configures none. label names the account in messages.
func convertFolders(c *converter, i int, label string, raw []rawFolder) []Folder {
	if len(raw) == 0 {
		return DefaultFolders()
	}
	folders := make([]Folder, 0, len(raw))
	first := map[string]int{}
	for j, rf := range raw {
		f := Folder{Alias: NormalizeAlias(rf.Alias), RemotePath: strings.TrimSpace(rf.RemotePath)}
		aliasVar := folderVar(i, j, "ALIAS")
		name := fmt.Sprintf("folder %d", j)
		switch {
		case f.Alias == "":
			c.add(aliasVar, "%s: %s has no alias; every folder needs one", label, name)
		case hasControl(f.Alias) || len(f.Alias) > 200:
			c.add(aliasVar, "%s: %s: an alias must be at most 200 bytes without control characters", label, name)
			f.Alias = ""
		default:
			name = "folder '" + f.Alias + "'"
			if k, dup := first[f.Alias]; dup {
				c.add(aliasVar, "%s: %s repeats the alias of folder %d (%s); aliases are compared trimmed and ignoring case", label, name, k, folderVar(i, k, "ALIAS"))
			} else {
				first[f.Alias] = j
			}
		}

		switch {
		case f.RemotePath != "" && rf.SpecialUse != "":
			c.add(folderVar(i, j, "REMOTE_PATH"), "%s: %s names both %s and %s; set exactly one", label, name, folderVar(i, j, "REMOTE_PATH"), folderVar(i, j, "SPECIAL_USE"))
		case f.RemotePath == "" && rf.SpecialUse == "":
			c.add(aliasVar, "%s: %s names neither %s nor %s; set exactly one", label, name, folderVar(i, j, "REMOTE_PATH"), folderVar(i, j, "SPECIAL_USE"))
		case rf.SpecialUse != "":
			if su, ok := enumIn(c, folderVar(i, j, "SPECIAL_USE"), label+": "+name+": ", rf.SpecialUse, SpecialUses); ok {
				f.SpecialUse = su
			}
		case hasControl(f.RemotePath):
			c.add(folderVar(i, j, "REMOTE_PATH"), "%s: %s: a remote path must not contain control characters", label, name)
		}
		folders = append(folders, f)
	}
	return folders
}
