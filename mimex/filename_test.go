package mimex

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"
)

func TestSanitizeFileName(t *testing.T) {
	t.Parallel()
	flag := "\U0001F1E9\U0001F1EA"                         // regional-indicator pair: one text element, two scalars
	thumbs := "\U0001F44D\U0001F3FD"                       // emoji + skin-tone modifier
	eAcute := "e\u0301"                                    // e + combining acute accent
	heart := "\u2764\uFE0F"                                // heart + variation selector
	family := "\U0001F468\u200D\U0001F469\u200D\U0001F467" // ZWJ sequence; ZWJ is a format character
	cases := []struct {
		name     string
		in       string
		want     string
		repaired bool
		unnamed  bool
	}{
		{"plain", "report.pdf", "report.pdf", false, false},
		{"empty", "", "", false, true},
		{"unix traversal", "../../etc/passwd", "passwd", true, false},
		{"windows traversal", `..\..\Windows\System32\evil.dll`, "evil.dll", true, false},
		{"drive and stream colon", `C:evil.txt`, "evil.txt", true, false},
		{"trailing separator leaves nothing", "dir/", "", true, true},
		{"dot-dot alone", "..", "", true, true},
		{"bidi override", "invoice\u202Efdp.exe", "invoicefdp.exe", true, false},
		{"bidi isolates and marks", "\u2066a\u2069\u200Fb\u200Ec\u061C.txt", "abc.txt", true, false},
		{"zero width and BOM", "\uFEFFre\u200Bport.pdf", "report.pdf", true, false},
		{"supplementary format character", "a\U000E0001b.txt", "ab.txt", true, false},
		{"control characters and line breaks", "evil\r\nname\x00\x07\t.txt", "evilname.txt", true, false},
		{"C1 control", "a\u0085b.txt", "ab.txt", true, false},
		{"invalid UTF-8 byte", "a\xffb.txt", "ab.txt", true, false},
		{"trimmed", "  spaced.txt \t", "spaced.txt", true, false},
		{"only formatting", "\u202E\u200B", "", true, true},
		{"ZWJ removed as a format character", family + ".png", "\U0001F468\U0001F469\U0001F467.png", true, false},
		{"unicode kept", "Übersicht – 2024 ☃.pdf", "Übersicht – 2024 ☃.pdf", false, false},
		{"exactly 200 elements", strings.Repeat(flag, 200), strings.Repeat(flag, 200), false, false},
		{"flag at the cut", strings.Repeat("a", 199) + flag + flag, strings.Repeat("a", 199) + flag, true, false},
		{"skin tone at the cut", strings.Repeat("b", 199) + thumbs + "x", strings.Repeat("b", 199) + thumbs, true, false},
		{"combining mark at the cut", strings.Repeat("c", 199) + eAcute + eAcute, strings.Repeat("c", 199) + eAcute, true, false},
		{"variation selector at the cut", strings.Repeat("d", 199) + heart + heart, strings.Repeat("d", 199) + heart, true, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, repaired, unnamed := SanitizeFileName(tc.in)
			require.Equal(t, tc.want, got)
			require.Equal(t, tc.repaired, repaired, "repaired")
			require.Equal(t, tc.unnamed, unnamed, "unnamed")
			require.True(t, utf8.ValidString(got))
			require.LessOrEqual(t, uniseg.GraphemeClusterCount(got), MaxFileNameTextElements)
		})
	}
}

func TestSanitizeFileNamePathologicalCluster(t *testing.T) {
	t.Parallel()
	// One base letter carrying thousands of combining marks is one text
	// element; the scalar backstop still bounds the name, and the cut
	// never splits the cluster (so nothing of it is kept).
	in := "ok" + "x" + strings.Repeat("\u0301", 5000) + ".txt"
	got, repaired, _ := SanitizeFileName(in)
	require.True(t, repaired)
	require.Equal(t, "ok", got)
}

func fileNameMessageCases() []tcase {
	return []tcase{
		{
			name: "RFC 2047 name with traversal",
			raw: crlf(`Subject: names
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

Files.
--m1
Content-Type: application/octet-stream; name="=?utf-8?q?=2E=2E=2F=2E=2E=2Fetc=2Fpasswd?="

x
--m1
Content-Type: application/octet-stream
Content-Disposition: attachment; filename*=utf-8''%E2%80%AEgpj.exe

x
--m1
Content-Type: application/octet-stream
Content-Disposition: attachment;
 filename*0*=iso-8859-1''R%E9sum%E9%20;
 filename*1="final.pdf"

x
--m1
Content-Type: application/octet-stream; name="fallback.bin"
Content-Disposition: attachment

x
--m1
Content-Type: application/octet-stream
Content-Disposition: attachment; filename=""

x
--m1
Content-Type: application/octet-stream
Content-Disposition: attachment; filename="a.txt"; filename*=utf-8''%F0%9F%98%80b.txt

x
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 6, r.Attachments.Count)
				items := r.Attachments.Items
				require.Equal(t, "passwd", items[0].FileName)
				require.True(t, items[0].FileNameRepaired)
				require.Equal(t, "gpj.exe", items[1].FileName, "the RLO override is removed")
				require.True(t, items[1].FileNameRepaired)
				require.Equal(t, "Résumé final.pdf", items[2].FileName, "RFC 2231 continuation in ISO-8859-1")
				require.False(t, items[2].FileNameRepaired)
				require.Equal(t, "fallback.bin", items[3].FileName, "Content-Type name when the disposition has none")
				require.True(t, items[4].Unnamed)
				require.False(t, items[4].FileNameRepaired)
				require.Equal(t, "", items[4].FileName)
				require.Equal(t, "😀b.txt", items[5].FileName, "the extended value wins")
			},
		},
		{
			name: "emoji at the 200 text-element cut",
			raw: crlf(`Subject: long name
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

Long.
--m1
Content-Type: application/octet-stream
Content-Disposition: attachment; filename*=utf-8''` + strings.Repeat("n", 199) + `%F0%9F%87%A9%F0%9F%87%AA%F0%9F%87%A9%F0%9F%87%AA.bin

x
--m1--
`),
			check: func(t *testing.T, r Result) {
				a := r.Attachments.Items[0]
				require.Equal(t, strings.Repeat("n", 199)+"\U0001F1E9\U0001F1EA", a.FileName)
				require.True(t, a.FileNameRepaired)
			},
		},
	}
}

func TestFileNamesInMessages(t *testing.T) {
	t.Parallel()
	runCases(t, fileNameMessageCases())
}
