package folders_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/failure"
	"github.com/mailfathom/mailfathom/internal/folders"
)

// A catalog shaped like Dovecot's with special-use folders, plus entries
// that are not candidates.
var catalog = []folders.Remote{
	{Path: "INBOX", Delimiter: "/", Attributes: []string{`\HasNoChildren`}},
	{Path: "Sent", Delimiter: "/", Attributes: []string{`\HasNoChildren`, `\Sent`}},
	{Path: "Drafts", Delimiter: "/", Attributes: []string{`\Drafts`}},
	{Path: "Archive", Delimiter: "/", Attributes: []string{`\Archive`, `\HasChildren`}},
	{Path: "Archive/2024", Delimiter: "/", Attributes: []string{`\Archive`, `\HasNoChildren`}},
	{Path: " Padded ", Delimiter: "/"},
	{Path: "Padded", Delimiter: "/"},
	{Path: "Projects", Delimiter: "/", Attributes: []string{`\Noselect`, `\HasChildren`}},
	{Path: "Gone", Delimiter: "/", Attributes: []string{`\NonExistent`}},
	{Path: "", Delimiter: "/", Attributes: []string{`\Noselect`}},
	{Path: "Trash", Delimiter: "/", Attributes: []string{`\trash`}},
	{Path: "Important", Delimiter: "/", Attributes: []string{`\Important`}},
}

func remote(t *testing.T, path string, in []folders.Remote) *folders.Remote {
	t.Helper()
	i := slices.IndexFunc(in, func(r folders.Remote) bool { return r.Path == path })
	require.GreaterOrEqual(t, i, 0, "no %q in the catalog", path)
	r := in[i]
	return &r
}

func TestResolve(t *testing.T) {
	t.Parallel()

	for _, tc := range []struct {
		name    string
		mapping folders.Mapping
		catalog []folders.Remote
		want    string // the path it resolves to, when it does
		err     error
	}{
		{name: "RemotePathExact", mapping: folders.Mapping{Alias: "A", RemotePath: "Archive/2024"}, want: "Archive/2024"},
		{name: "RemotePathIsCaseSensitive", mapping: folders.Mapping{Alias: "A", RemotePath: "archive"}, err: folders.ErrFolderAliasUnresolved},
		{name: "RemotePathPlainMatchesPlainOnly", mapping: folders.Mapping{Alias: "P", RemotePath: "Padded"}, want: "Padded"},
		{name: "RemotePathWithSurroundingSpaces", mapping: folders.Mapping{Alias: "P", RemotePath: " Padded "}, want: " Padded "},
		{
			name:    "AdvertisedSpacesAreNotTrimmed",
			mapping: folders.Mapping{Alias: "P", RemotePath: "Padded"},
			catalog: []folders.Remote{{Path: " Padded"}, {Path: "Padded "}},
			err:     folders.ErrFolderAliasUnresolved,
		},
		{name: "RemotePathMissing", mapping: folders.Mapping{Alias: "X", RemotePath: "Nope"}, err: folders.ErrFolderAliasUnresolved},
		{name: "RemotePathNoselectIsNotAFolder", mapping: folders.Mapping{Alias: "X", RemotePath: "Projects"}, err: folders.ErrFolderAliasUnresolved},
		{name: "RemotePathNonExistent", mapping: folders.Mapping{Alias: "X", RemotePath: "Gone"}, err: folders.ErrFolderAliasUnresolved},
		{
			name:    "RemotePathListedTwiceIsOneFolder",
			mapping: folders.Mapping{Alias: "S", RemotePath: "Shared/Team"},
			catalog: []folders.Remote{{Path: "Shared/Team", Delimiter: "/"}, {Path: "Shared/Team", Delimiter: "/"}},
			want:    "Shared/Team",
		},
		{name: "SpecialUseSent", mapping: folders.Mapping{Alias: "SENT", SpecialUse: "Sent"}, want: "Sent"},
		{name: "SpecialUseDrafts", mapping: folders.Mapping{Alias: "D", SpecialUse: "Drafts"}, want: "Drafts"},
		{name: "SpecialUseImportant", mapping: folders.Mapping{Alias: "I", SpecialUse: "Important"}, want: "Important"},
		{name: "AttributesAreCaseInsensitive", mapping: folders.Mapping{Alias: "T", SpecialUse: "Trash"}, want: "Trash"},
		{name: "SpecialUseAmbiguous", mapping: folders.Mapping{Alias: "ARCHIVE", SpecialUse: "Archive"}, err: folders.ErrFolderAliasAmbiguous},
		{name: "SpecialUseAbsent", mapping: folders.Mapping{Alias: "J", SpecialUse: "Junk"}, err: folders.ErrFolderAliasUnresolved},
		{
			name:    "NoNameFallbackForOtherRoles",
			mapping: folders.Mapping{Alias: "J", SpecialUse: "Junk"},
			catalog: []folders.Remote{{Path: "Junk"}, {Path: "INBOX"}},
			err:     folders.ErrFolderAliasUnresolved,
		},
		{name: "UnknownRole", mapping: folders.Mapping{Alias: "U", SpecialUse: "Spam"}, err: folders.ErrFolderAliasUnresolved},
		{name: "NeitherPathNorRole", mapping: folders.Mapping{Alias: "N"}, err: folders.ErrFolderAliasUnresolved},
		{name: "BothPathAndRole", mapping: folders.Mapping{Alias: "B", RemotePath: "Sent", SpecialUse: "Sent"}, err: folders.ErrFolderAliasUnresolved},
		{name: "InboxFallsBackToTheName", mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"}, want: "INBOX"},
		{
			name:    "InboxNameIsCaseInsensitive",
			mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"},
			catalog: []folders.Remote{{Path: "Sent", Attributes: []string{`\Sent`}}, {Path: "Inbox"}},
			want:    "Inbox",
		},
		{
			name:    "InboxAttributeWinsOverTheName",
			mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"},
			catalog: []folders.Remote{{Path: "INBOX"}, {Path: "Posteingang", Attributes: []string{`\Inbox`}}},
			want:    "Posteingang",
		},
		{
			name:    "InboxAttributeAmbiguousDoesNotFallBack",
			mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"},
			catalog: []folders.Remote{{Path: "INBOX"}, {Path: "A", Attributes: []string{`\Inbox`}}, {Path: "B", Attributes: []string{`\Inbox`}}},
			err:     folders.ErrFolderAliasAmbiguous,
		},
		{
			name:    "InboxNameExactAmongCasings",
			mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"},
			catalog: []folders.Remote{{Path: "inbox"}, {Path: "INBOX"}},
			want:    "INBOX",
		},
		{
			name:    "InboxCasingsWithoutTheExactNameAmbiguous",
			mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"},
			catalog: []folders.Remote{{Path: "inbox"}, {Path: "Inbox"}},
			err:     folders.ErrFolderAliasAmbiguous,
		},
		{
			name:    "InboxAbsent",
			mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"},
			catalog: []folders.Remote{{Path: "Sent", Attributes: []string{`\Sent`}}, {Path: " INBOX"}},
			err:     folders.ErrFolderAliasUnresolved,
		},
		{
			name:    "InboxNoselectIsNotAFolder",
			mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"},
			catalog: []folders.Remote{{Path: "INBOX", Attributes: []string{`\Noselect`}}},
			err:     folders.ErrFolderAliasUnresolved,
		},
		{
			name:    "RoleListedTwiceIsOneFolder",
			mapping: folders.Mapping{Alias: "SENT", SpecialUse: "Sent"},
			catalog: []folders.Remote{{Path: "Sent", Attributes: []string{`\Sent`}}, {Path: "Sent", Attributes: []string{`\Sent`}}},
			want:    "Sent",
		},
		{name: "EmptyCatalog", mapping: folders.Mapping{Alias: "INBOX", SpecialUse: "Inbox"}, catalog: []folders.Remote{}, err: folders.ErrFolderAliasUnresolved},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			in := tc.catalog
			if in == nil {
				in = catalog
			}

			// Every order of the catalog gives the same answer.
			for _, order := range [][]folders.Remote{in, reversed(in), rotated(in)} {
				got := folders.Resolve([]folders.Mapping{tc.mapping}, order)
				require.Len(t, got, 1)
				res := got[0]
				require.Equal(t, tc.mapping.Alias, res.Alias)
				if tc.err != nil {
					require.ErrorIs(t, res.Err, tc.err)
					require.Nil(t, res.Remote)
					continue
				}
				require.NoError(t, res.Err)
				require.Equal(t, remote(t, tc.want, in), res.Remote)
			}
		})
	}
}

func reversed(in []folders.Remote) []folders.Remote {
	out := slices.Clone(in)
	slices.Reverse(out)
	return out
}

func rotated(in []folders.Remote) []folders.Remote {
	if len(in) < 2 {
		return in
	}
	return append(slices.Clone(in[len(in)/2:]), in[:len(in)/2]...)
}

func TestResolveMappingsAreIndependent(t *testing.T) {
	t.Parallel()

	got := folders.Resolve([]folders.Mapping{
		{Alias: "INBOX", SpecialUse: "Inbox"},
		{Alias: "ARCHIVE", SpecialUse: "Archive"},
		{Alias: "TYPO", RemotePath: "Snet"},
		{Alias: "SENT", SpecialUse: "Sent"},
		{Alias: "YEAR", RemotePath: "Archive/2024"},
	}, catalog)
	require.Len(t, got, 5)
	var aliases []string
	for _, r := range got {
		aliases = append(aliases, r.Alias)
	}
	require.Equal(t, []string{"INBOX", "ARCHIVE", "TYPO", "SENT", "YEAR"}, aliases, "one resolution per mapping, in order")
	require.NoError(t, got[0].Err)
	require.Equal(t, "INBOX", got[0].Remote.Path)
	require.ErrorIs(t, got[1].Err, folders.ErrFolderAliasAmbiguous)
	require.ErrorIs(t, got[2].Err, folders.ErrFolderAliasUnresolved)
	require.NoError(t, got[3].Err)
	require.Equal(t, "Sent", got[3].Remote.Path)
	require.NoError(t, got[4].Err)
	require.Equal(t, "Archive/2024", got[4].Remote.Path)
}

func TestResolveErrorText(t *testing.T) {
	t.Parallel()

	got := folders.Resolve([]folders.Mapping{
		{Alias: "ARCHIVE", SpecialUse: "Archive"},
		{Alias: "PRIVATE", RemotePath: "Clients/Jane Doe divorce"},
		{Alias: "JUNK", SpecialUse: "Junk"},
	}, append(slices.Clone(catalog), folders.Remote{Path: "Clients/Jane Doe"}))

	ambiguous := got[0].Err
	var re *folders.ResolutionError
	require.ErrorAs(t, ambiguous, &re)
	require.Equal(t, 2, re.Candidates)
	require.Contains(t, ambiguous.Error(), `"ARCHIVE"`)
	require.Contains(t, ambiguous.Error(), "special-use role Archive")
	require.Contains(t, ambiguous.Error(), "configure its RemotePath")
	require.NotContains(t, ambiguous.Error(), "2024", "no path in the text")

	missing := got[1].Err
	require.Contains(t, missing.Error(), `"PRIVATE"`)
	require.Contains(t, missing.Error(), "remote path")
	require.NotContains(t, missing.Error(), "Jane")
	require.False(t, errors.Is(missing, folders.ErrFolderAliasAmbiguous))

	require.Contains(t, got[2].Err.Error(), `"JUNK"`)
	require.Contains(t, got[2].Err.Error(), `\Junk`)
}

func TestResolveDuplicateListingsIndependentOfOrder(t *testing.T) {
	t.Parallel()

	a := folders.Remote{Path: "Shared/Team", Delimiter: ".", Attributes: []string{`\Sent`}}
	b := folders.Remote{Path: "Shared/Team", Delimiter: "/", Attributes: []string{`\Sent`, `\HasNoChildren`}}
	mappings := []folders.Mapping{{Alias: "SENT", SpecialUse: "Sent"}, {Alias: "TEAM", RemotePath: "Shared/Team"}}
	first := folders.Resolve(mappings, []folders.Remote{a, b})
	second := folders.Resolve(mappings, []folders.Remote{b, a})
	require.Equal(t, first, second)
	require.NoError(t, first[0].Err)
	require.Equal(t, &a, first[0].Remote)
}

func TestResolveReturnsACopy(t *testing.T) {
	t.Parallel()

	in := []folders.Remote{{Path: "Sent", Delimiter: "/", Attributes: []string{`\Sent`}}}
	got := folders.Resolve([]folders.Mapping{{Alias: "SENT", SpecialUse: "Sent"}}, in)
	require.NoError(t, got[0].Err)
	got[0].Remote.Attributes[0] = "changed"
	got[0].Remote.Path = "changed"
	require.Equal(t, `\Sent`, in[0].Attributes[0])
	require.Equal(t, "Sent", in[0].Path)
}

func TestIdentity(t *testing.T) {
	t.Parallel()

	got := folders.Resolve([]folders.Mapping{
		{Alias: "ARCHIVE", SpecialUse: "Archive"},
		{Alias: "JUNK", SpecialUse: "Junk"},
	}, catalog)
	require.Equal(t, "FolderAliasAmbiguous", failure.Name(got[0].Err))
	require.Contains(t, got[0].Err.Error(), "FolderAliasAmbiguous")
	require.Equal(t, "FolderAliasUnresolved", failure.Name(got[1].Err))
	require.Contains(t, got[1].Err.Error(), "FolderAliasUnresolved")
	require.Equal(t, "FolderAliasUnresolved", failure.Name(fmt.Errorf("wrapped: %w", got[1].Err)))
}
