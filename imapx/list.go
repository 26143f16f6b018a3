package imapx

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/mailfathom/mailfathom/imapx/internal/wire"
)

// ListFolders lists the selectable folders of the personal, other-users and
// shared namespaces the account can reach: NAMESPACE when the server
// advertises it, then LIST "" "<prefix>*" per namespace, or LIST "" "*"
// without NAMESPACE; and LIST "" "INBOX" when no listing produced the inbox
// (a personal namespace prefixed "INBOX." lists only its children).
// When the server advertises LIST-EXTENDED, RETURN (CHILDREN SPECIAL-USE) asks
// for the \HasChildren/\HasNoChildren and special-use attributes (SPECIAL-USE
// only when advertised), which an extended LIST otherwise leaves out; a plain
// LIST is used without LIST-EXTENDED, and Dovecot, like most servers, puts
// both in it anyway.
//
// Paths are kept exactly as listed. Entries marked \NonExistent or \NoSelect
// and entries with an empty path are left out, each costing only itself;
// duplicates (a folder several patterns match) are listed once, first
// listing wins. When more than SessionOptions.MaxListedFolders folders would
// be retained, the rest of the response is read and dropped and
// ErrFolderListTooLarge is returned.
//
// LIST selects no folder, so an open folder stays open.
func (s *ReadSession) ListFolders(ctx context.Context) ([]Folder, error) {
	start := time.Now()
	patterns := []string{"*"}
	if s.caps.Has(imap.CapNamespace) {
		var ns *imap.NamespaceData
		err := s.run(ctx, "NAMESPACE", func(c *imapclient.Client, _ *wire.Watchdog) error {
			var err error
			ns, err = c.Namespace().Wait()
			return err
		})
		if err != nil {
			return nil, err
		}
		if p := namespacePatterns(ns); len(p) > 0 {
			patterns = p
		}
	}

	var listOpts *imap.ListOptions
	if s.caps.Has(imap.CapListExtended) {
		// An extended LIST returns only the attributes asked for.
		listOpts = &imap.ListOptions{
			ReturnChildren:   true,
			ReturnSpecialUse: s.caps.Has(imap.CapSpecialUse),
		}
	}
	limit := s.opts.maxListedFolders()
	l := folderList{limit: limit, seen: map[string]bool{}}
	for _, pattern := range patterns {
		if err := s.list(ctx, pattern, listOpts, &l); err != nil {
			return nil, err
		}
	}
	if !l.hasInbox {
		if err := s.list(ctx, "INBOX", listOpts, &l); err != nil {
			return nil, err
		}
	}
	s.debug(ctx, "imap list", slog.Int("namespaces", len(patterns)), slog.Int("folders", len(l.folders)),
		slog.Int("excluded", l.excluded), slog.Duration("elapsed", time.Since(start)))
	return l.folders, nil
}

// namespacePatterns returns a LIST pattern per namespace, deduplicated.
func namespacePatterns(ns *imap.NamespaceData) []string {
	var out []string
	seen := map[string]bool{}
	for _, group := range [][]imap.NamespaceDescriptor{ns.Personal, ns.Other, ns.Shared} {
		for _, d := range group {
			p := d.Prefix + "*"
			if !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

type folderList struct {
	limit    int
	folders  []Folder
	seen     map[string]bool
	excluded int
	hasInbox bool
}

// add retains d unless it is excluded or a duplicate, and reports whether
// the limit still holds.
func (l *folderList) add(d *imap.ListData) bool {
	if d.Mailbox == "" || hasAttr(d.Attrs, imap.MailboxAttrNonExistent) || hasAttr(d.Attrs, imap.MailboxAttrNoSelect) {
		l.excluded++
		return true
	}
	if l.seen[d.Mailbox] {
		return true
	}
	if len(l.folders) >= l.limit {
		return false
	}
	l.seen[d.Mailbox] = true
	if strings.EqualFold(d.Mailbox, "INBOX") {
		l.hasInbox = true
	}
	f := Folder{Path: d.Mailbox, Attributes: make([]string, len(d.Attrs))}
	if d.Delim != 0 {
		f.Delimiter = string(d.Delim)
	}
	for i, a := range d.Attrs {
		f.Attributes[i] = string(a)
	}
	l.folders = append(l.folders, f)
	return true
}

func hasAttr(attrs []imap.MailboxAttr, want imap.MailboxAttr) bool {
	for _, a := range attrs {
		if strings.EqualFold(string(a), string(want)) {
			return true
		}
	}
	return false
}

// list runs one LIST and adds its entries to l. Past the limit it reads the
// rest of the response without keeping it.
func (s *ReadSession) list(ctx context.Context, pattern string, opts *imap.ListOptions, l *folderList) error {
	tooLarge := false
	err := s.run(ctx, "LIST", func(c *imapclient.Client, _ *wire.Watchdog) error {
		cmd := c.List("", pattern, opts)
		for d := cmd.Next(); d != nil; d = cmd.Next() {
			if !tooLarge && !l.add(d) {
				tooLarge = true
			}
		}
		return cmd.Close()
	})
	if err != nil {
		return err
	}
	if tooLarge {
		return fmt.Errorf("%w (limit %d)", ErrFolderListTooLarge, l.limit)
	}
	return nil
}
