// Package folders resolves configured folder aliases against the folders an
// IMAP server advertises. It is pure: the caller lists the folders (LIST)
// and commits the resulting bindings.
//
// A remote folder path can carry personal or organizational information, so
// no error this package returns names one; errors name the alias and how it
// was configured to resolve.
package folders

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// Mapping is one configured folder: an alias and exactly one of a remote
// path and a special-use role.
type Mapping struct {
	// Alias is the operator-facing name (trimmed and upper-cased by
	// configuration).
	Alias string
	// RemotePath is the configured path, trimmed by configuration; "" when
	// SpecialUse is set.
	RemotePath string
	// SpecialUse is a configuration role name: Inbox, Archive, Drafts,
	// Sent, Junk, Trash, All, Flagged or Important; "" when RemotePath is
	// set.
	SpecialUse string
}

// Remote is one folder the server advertised, as listed: Path is exact,
// surrounding spaces included, because IMAP allows a quoted name that
// begins or ends with one.
type Remote struct {
	Path       string
	Delimiter  string
	Attributes []string
}

// Resolution is the outcome for one mapping: Remote, or Err wrapping
// ErrFolderAliasUnresolved or ErrFolderAliasAmbiguous.
type Resolution struct {
	Alias  string
	Remote *Remote
	Err    error
}

var (
	// ErrFolderAliasUnresolved: no advertised folder matches the mapping.
	ErrFolderAliasUnresolved = failure.New("FolderAliasUnresolved", "folders: no advertised folder matches the alias")
	// ErrFolderAliasAmbiguous: several advertised folders match it.
	ErrFolderAliasAmbiguous = failure.New("FolderAliasAmbiguous", "folders: several advertised folders match the alias")
)

// ResolutionError is why one alias did not resolve. Its text names the
// alias, the failure identity and what the alias was configured to match
// (remote path or role), never a path.
type ResolutionError struct {
	Alias string
	// Configured describes what the alias was configured to match, e.g.
	// "special-use role Sent" or "its configured remote path".
	Configured string
	// Candidates is how many distinct folders matched (0 or 2 and more).
	Candidates int
	// Kind is ErrFolderAliasUnresolved or ErrFolderAliasAmbiguous.
	Kind   error
	detail string
}

func (e *ResolutionError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "folder alias %q (%s): %s: ", e.Alias, e.Configured, failure.Name(e.Kind))
	if errors.Is(e.Kind, ErrFolderAliasAmbiguous) {
		fmt.Fprintf(&b, "%d advertised folders match; configure its RemotePath", e.Candidates)
	} else {
		b.WriteString(e.detail)
	}
	return b.String()
}

// Unwrap returns Kind, so errors.Is works with the sentinels.
func (e *ResolutionError) Unwrap() error { return e.Kind }

// Identity implements failure.Named: FolderAliasUnresolved or
// FolderAliasAmbiguous, which ask the operator for different things:
// fixing the mapping, or configuring its RemotePath.
func (e *ResolutionError) Identity() string { return failure.Name(e.Kind) }

// specialUseAttributes maps each configuration role to the mailbox
// attribute that carries it: RFC 6154's, RFC 8457's \Important, and the
// \Inbox attribute some servers advertise.
var specialUseAttributes = map[string]string{
	"inbox":     `\Inbox`,
	"archive":   `\Archive`,
	"drafts":    `\Drafts`,
	"sent":      `\Sent`,
	"junk":      `\Junk`,
	"trash":     `\Trash`,
	"all":       `\All`,
	"flagged":   `\Flagged`,
	"important": `\Important`,
}

// Resolve resolves each mapping independently against catalog, in mapping
// order:
//
//   - RemotePath: the advertised folder whose path equals it exactly;
//   - SpecialUse: the advertised folder carrying the role's attribute; when
//     none carries it and the role is Inbox, the folder named INBOX (the
//     name is case-insensitive, RFC 3501). No other role falls back to a
//     name.
//
// Several distinct folders matching is ambiguous, never "the first listed":
// LIST order is not an identity. Entries that cannot be opened (\Noselect,
// \NonExistent) and entries with an empty path are not candidates. The
// same path listed twice is one folder. A mapping that fails costs that
// alias only.
func Resolve(mappings []Mapping, catalog []Remote) []Resolution {
	usable := make([]Remote, 0, len(catalog))
	for _, r := range catalog {
		if r.Path != "" && !hasAttribute(r, `\Noselect`) && !hasAttribute(r, `\NonExistent`) {
			usable = append(usable, r)
		}
	}
	out := make([]Resolution, len(mappings))
	for i, m := range mappings {
		remote, err := resolveOne(m, usable)
		out[i] = Resolution{Alias: m.Alias, Remote: remote, Err: err}
	}
	return out
}

func resolveOne(m Mapping, catalog []Remote) (*Remote, error) {
	switch {
	case m.RemotePath != "" && m.SpecialUse != "":
		return nil, unresolved(m.Alias, "remote path and special-use role", "the mapping names both; configure exactly one")
	case m.RemotePath != "":
		const identity = "its configured remote path"
		matches := distinct(catalog, func(r Remote) bool { return r.Path == m.RemotePath })
		// Distinct by exact path, and the path is what matched: at most one.
		if len(matches) == 0 {
			return nil, unresolved(m.Alias, identity, "no advertised folder has that exact path")
		}
		return clone(matches[0]), nil
	case m.SpecialUse != "":
		identity := "special-use role " + m.SpecialUse
		attribute, ok := specialUseAttributes[strings.ToLower(m.SpecialUse)]
		if !ok {
			return nil, unresolved(m.Alias, identity, "not a known special-use role")
		}
		matches := distinct(catalog, func(r Remote) bool { return hasAttribute(r, attribute) })
		missing := "no advertised folder carries " + attribute
		if len(matches) == 0 && attribute == `\Inbox` {
			matches = inboxByName(catalog)
			missing += " or is named INBOX"
			if len(matches) > 1 {
				identity += ", by the name INBOX"
			}
		}
		switch len(matches) {
		case 0:
			return nil, unresolved(m.Alias, identity, missing)
		case 1:
			return clone(matches[0]), nil
		}
		return nil, &ResolutionError{Alias: m.Alias, Configured: identity, Candidates: len(matches), Kind: ErrFolderAliasAmbiguous}
	}
	return nil, unresolved(m.Alias, "no identity", "the mapping names neither a remote path nor a special-use role")
}

// inboxByName returns the folders named INBOX in any case. When several
// casings are listed, the exact name INBOX is the one RFC 3501 reserves.
func inboxByName(catalog []Remote) []Remote {
	matches := distinct(catalog, func(r Remote) bool { return strings.EqualFold(r.Path, "INBOX") })
	if len(matches) > 1 {
		if i := slices.IndexFunc(matches, func(r Remote) bool { return r.Path == "INBOX" }); i >= 0 {
			return matches[i : i+1]
		}
	}
	return matches
}

// distinct returns the catalog entries match accepts, one per path: a path
// listed twice (e.g. under two namespaces) is one folder. Of its listings
// the one with the least delimiter and attributes is kept, so the answer
// does not depend on listing order.
func distinct(catalog []Remote, match func(Remote) bool) []Remote {
	var out []Remote
	for _, r := range catalog {
		if !match(r) {
			continue
		}
		i := slices.IndexFunc(out, func(o Remote) bool { return o.Path == r.Path })
		switch {
		case i < 0:
			out = append(out, r)
		case listingKey(r) < listingKey(out[i]):
			out[i] = r
		}
	}
	return out
}

func listingKey(r Remote) string {
	attrs := slices.Clone(r.Attributes)
	slices.Sort(attrs)
	return r.Delimiter + "\x00" + strings.Join(attrs, "\x00")
}

// hasAttribute reports whether r carries attribute; mailbox attributes are
// case-insensitive.
func hasAttribute(r Remote, attribute string) bool {
	return slices.ContainsFunc(r.Attributes, func(a string) bool { return strings.EqualFold(a, attribute) })
}

func clone(r Remote) *Remote {
	r.Attributes = slices.Clone(r.Attributes)
	return &r
}

func unresolved(alias, identity, detail string) error {
	return &ResolutionError{Alias: alias, Configured: identity, Kind: ErrFolderAliasUnresolved, detail: detail}
}
