package imapx_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/imapx"
	"github.com/mailfathom/mailfathom/internal/testharness/dovecot"
)

func byPath(folders []imapx.Folder) map[string]imapx.Folder {
	m := map[string]imapx.Folder{}
	for _, f := range folders {
		m[f.Path] = f
	}
	return m
}

// TestListFolders: the inbox, the special-use folders with their attributes,
// nested folders; a \Noselect parent is left out.
func TestListFolders(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	// Creating only a/b leaves a as a \Noselect parent in Dovecot's
	// Maildir++ LAYOUT=fs (measured on 2.3.19: LIST says (\Noselect
	// \HasChildren)).
	b.user.CreateFolder("a/b")
	b.user.CreateFolder(" padded ")
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	// An open folder stays open across LIST.
	_, err := s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	folders, err := s.ListFolders(b.ctx)
	require.NoError(t, err)
	got := byPath(folders)
	require.Len(t, got, len(folders), "no duplicates")

	require.Contains(t, got, "INBOX")
	for name, attr := range dovecot.SpecialUseFolders {
		require.Contains(t, got, name)
		require.Contains(t, got[name].Attributes, attr, name)
		require.Contains(t, got[name].Attributes, `\HasNoChildren`, name)
	}
	require.Contains(t, got, dovecot.NestedFolder)
	require.Equal(t, "/", got[dovecot.NestedFolder].Delimiter)
	require.Contains(t, got, "a/b")
	require.NotContains(t, got, "a", "a \\Noselect parent is not a folder")
	require.Contains(t, got, " padded ", "the path is kept exactly, spaces included")
	require.Len(t, folders, 1+len(dovecot.SpecialUseFolders)+1+2) // INBOX, special-use, nested, a/b, " padded "

	_, err = s.SearchUIDs(b.ctx, 0, timeZero)
	require.NoError(t, err, "the examined folder is still open")
}

// TestListFoldersTooLarge: past MaxListedFolders the listing fails, the
// connection stays usable.
func TestListFoldersTooLarge(t *testing.T) {
	t.Parallel()
	b := setup(t, nil)
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{MaxListedFolders: 3})
	_, err := s.ListFolders(b.ctx)
	require.ErrorIs(t, err, imapx.ErrFolderListTooLarge)
	require.False(t, imapx.IsTransient(err))
	require.Contains(t, err.Error(), "limit 3")
	_, err = s.Examine(b.ctx, "INBOX")
	require.NoError(t, err)

	// Exactly at the limit is fine: INBOX, five special-use folders and
	// the nested one.
	exact := 1 + len(dovecot.SpecialUseFolders) + 1
	s = b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{MaxListedFolders: exact})
	folders, err := s.ListFolders(b.ctx)
	require.NoError(t, err)
	require.Len(t, folders, exact)
}

// TestListFoldersSharedNamespace: folders of a namespace that only a LIST
// with its own prefix shows (Dovecot's list = no) are found through
// NAMESPACE.
func TestListFoldersSharedNamespace(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "mfpublic-")
	require.NoError(t, err)
	t.Cleanup(func() { os.RemoveAll(dir) })
	require.NoError(t, os.Chmod(dir, 0o777)) // Dovecot's mail user writes here
	srv := dovecot.Start(t, dovecot.WithExtraConfig(fmt.Sprintf(`namespace public {
  type = public
  separator = /
  prefix = Public/
  location = maildir:%s:LAYOUT=fs
  list = no
  subscriptions = no
}`, filepath.Join(dir, "mail"))))
	b := setup(t, srv)
	b.user.CreateFolder("Public/Team")
	s := b.open(b.endpoint(imapx.TLSOnConnect), imapx.SessionOptions{})
	folders, err := s.ListFolders(b.ctx)
	require.NoError(t, err)
	got := byPath(folders)
	require.Contains(t, got, "Public/Team")
	require.Contains(t, got, "INBOX")
	_, err = s.Examine(b.ctx, "Public/Team")
	require.NoError(t, err)
}
