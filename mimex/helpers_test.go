package mimex

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// crlf turns a readable literal written with "\n" line ends into the CRLF
// form mail transport carries.
func crlf(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// tcase is one hand-written message and what must hold of its Result. Every
// table's messages also seed FuzzExtract.
type tcase struct {
	name  string
	raw   string
	lim   Limits
	check func(t *testing.T, r Result)
}

func runCases(t *testing.T, cases []tcase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := Extract([]byte(tc.raw), tc.lim)
			checkInvariants(t, r, tc.lim)
			tc.check(t, r)
		})
	}
}

// allCases lists every table: the seed corpus of the fuzzer.
func allCases() []tcase {
	var all []tcase
	for _, table := range [][]tcase{headerCases(), attachmentCases(), fileNameMessageCases(), bodyCases(), limitCases()} {
		all = append(all, table...)
	}
	return all
}

// checkInvariants holds for every Result, readable or not.
func checkInvariants(t testing.TB, r Result, lim Limits) {
	t.Helper()
	lim = lim.withDefaults()
	if !r.Readable {
		require.NotEqual(t, FailureNone, r.Failure, "unreadable without a named failure")
		require.Equal(t, BodyNotExtracted, r.Body.State)
		require.Empty(t, r.Participants)
		require.Empty(t, r.Attachments.Items)
		return
	}
	require.Equal(t, FailureNone, r.Failure)
	require.NotEqual(t, BodyNotExtracted, r.Body.State)
	require.GreaterOrEqual(t, r.Attachments.TotalDecodedSize, int64(0))
	require.Equal(t, len(r.Attachments.Items), r.Attachments.Count)
	require.GreaterOrEqual(t, r.Attachments.InlineResourceCount, 0)
	var total int64
	for _, a := range r.Attachments.Items {
		require.GreaterOrEqual(t, a.DecodedSize, int64(0))
		total += a.DecodedSize
		require.Equal(t, a.Unnamed, a.FileName == "")
		require.LessOrEqual(t, len([]rune(a.FileName)), maxFileNameRunes)
		require.False(t, strings.ContainsAny(a.FileName, "/\\:"), "file name is a path: %q", a.FileName)
	}
	require.Equal(t, total, r.Attachments.TotalDecodedSize)
	require.LessOrEqual(t, len([]rune(r.Body.Untrimmed)), lim.MaxExtractedTextCharacters)
	require.LessOrEqual(t, len(r.Body.Text), len(r.Body.Untrimmed))
	require.True(t, strings.HasPrefix(r.Body.Untrimmed, r.Body.Text) || r.Body.Text == r.Body.Untrimmed,
		"trimming removes from the end only")
	if r.Body.State != BodyText {
		require.Empty(t, r.Body.Text)
		require.False(t, r.Body.Lossy)
	} else {
		require.NotEmpty(t, strings.TrimSpace(r.Body.Text))
	}
	require.NotContains(t, r.Subject, "\n")
	require.NotContains(t, r.Subject, "\r")
	for _, p := range r.Participants {
		require.Equal(t, strings.ToUpper(p.Address), p.Comparison)
		require.True(t, strings.HasSuffix(p.Address, "@"+p.Domain))
	}
	for _, id := range append(append([]string{r.MessageID}, r.InReplyTo...), r.References...) {
		require.False(t, hasControl(id), "identifier with a control character: %q", id)
	}
}
