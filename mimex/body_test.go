package mimex

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"
)

func bodyCases() []tcase {
	return []tcase{
		{
			name: "genuine text/plain wins over HTML",
			raw: crlf(`Subject: alt
Content-Type: multipart/alternative; boundary="a1"

--a1
Content-Type: text/html

<p>html only words</p>
--a1
Content-Type: text/plain; charset=iso-8859-1
Content-Transfer-Encoding: quoted-printable

Caf=E9 plain words, reversed order=
 still one line.
--a1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, BodyText, r.Body.State)
				require.False(t, r.Body.Lossy)
				require.Equal(t, "Café plain words, reversed order still one line.", r.Body.Text)
			},
		},
		{
			name: "an empty text/plain alternative is not genuine",
			raw: crlf(`Subject: alt
Content-Type: multipart/alternative; boundary="a1"

--a1
Content-Type: text/plain

  
--a1
Content-Type: text/html

<p>Only the HTML has words</p>
--a1--
`),
			check: func(t *testing.T, r Result) {
				require.True(t, r.Body.Lossy)
				require.Equal(t, "Only the HTML has words", r.Body.Text)
			},
		},
		{
			name: "HTML only: lossy, script style head dropped, entities decoded, blocks broken, space collapsed",
			raw: crlf(`Subject: html
Content-Type: text/html; charset=utf-8

<!DOCTYPE html>
<html>
  <head>
    <title>Title words</title>
    <meta name="x" content="meta words">
    <style>p { color: red; } .secret { }</style>
  </head>
  <body>
    <h1>Heading</h1>
    <p>First &amp; second,&nbsp;&nbsp;caf&eacute; &#8212; &lt;tag&gt;
       continues    here.</p>
    <script type="text/javascript">document.write("script words");</script>
    <div>Block one</div><div>Block two<br>after break</div>
    <ul><li>item one</li><li>item two</li></ul>
    <table><tr><td>cell a</td><td>cell b</td></tr></table>
    <img src="https://tracker.example/pixel.gif" alt="">
  </body>
</html>
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, BodyText, r.Body.State)
				require.True(t, r.Body.Lossy)
				require.Equal(t, "Heading\n\nFirst & second, café — <tag> continues here.\n\nBlock one\nBlock two\nafter break\n\nitem one\nitem two\n\ncell a cell b", r.Body.Text)
			},
		},
		{
			name: "an unclosed head does not hide the body",
			raw: crlf(`Subject: html
Content-Type: text/html

<html><head><title>Title</title><meta charset="utf-8"><p>Body after an unclosed head</p>
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Body after an unclosed head", r.Body.Text)
			},
		},
		{
			name: "leading blank lines do not count against the bound",
			raw:  "Subject: x\r\nContent-Type: text/plain\r\n\r\n\r\n\r\n    \r\nWords here",
			lim:  Limits{MaxExtractedTextCharacters: 5},
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Words", r.Body.Text)
				require.True(t, r.Body.Truncated)
			},
		},
		{
			name: "HTML in a legacy charset",
			raw: crlf(`Subject: html
Content-Type: text/html; charset=windows-1252
Content-Transfer-Encoding: quoted-printable

<p>=93quoted=94 na=EFve</p>
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "\u201cquoted\u201d na\u00efve", r.Body.Text)
			},
		},
		{
			name: "no textual body",
			raw: crlf(`Subject: just a picture
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: image/jpeg; name="photo.jpg"

JPEG
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, BodyNoTextualBody, r.Body.State)
				require.Empty(t, r.Body.Text)
				// The lone first child of a mixed is the body branch by rule 3.
				require.Equal(t, 0, r.Attachments.Count)
			},
		},
		{
			name: "text from the body branch only, never from an attachment",
			raw: crlf(`Subject: txt attachment
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/html

<p>Body words</p>
--m1
Content-Type: text/plain; name="notes.txt"
Content-Disposition: attachment; filename="notes.txt"

attachment words
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Body words", r.Body.Text)
				require.NotContains(t, r.Body.Untrimmed, "attachment words")
				require.True(t, r.Body.Lossy)
			},
		},
		{
			name: "signed body is readable",
			raw: crlf(`Subject: signed
Content-Type: multipart/signed; protocol="application/pgp-signature"; boundary="s1"

--s1
Content-Type: text/plain

Readable signed body.
--s1
Content-Type: application/pgp-signature

sig
--s1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, BodyText, r.Body.State)
				require.Equal(t, "Readable signed body.", r.Body.Text)
			},
		},
		{
			name: "Outlook separator: everything from the topmost on is trimmed",
			raw: crlf(`Subject: RE: RE: plan
Content-Type: text/plain

Agreed, let's go.

-----Original Message-----
From: B
Sent: Monday

Sounds good.

-----Original Message-----
From: C

Initial plan.
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Agreed, let's go.", r.Body.Text)
				require.Contains(t, r.Body.Untrimmed, "Initial plan.")
			},
		},
		{
			name: "attribution and trailing quote trimmed",
			raw: crlf(`Subject: Re: lunch
Content-Type: text/plain

Yes, noon works.

On Mon, 2 Jan 2006 at 15:04, Alice <alice@example.org> wrote:
> Lunch tomorrow?
>
> Alice
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Yes, noon works.", r.Body.Text)
			},
		},
		{
			name: "prose ending in wrote: is not an attribution",
			raw: crlf(`Subject: Re: quote
Content-Type: text/plain

This is what my colleague, who has been working on this for a long time, wrote:
> The system is down.
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, r.Body.Untrimmed, r.Body.Text)
				require.Contains(t, r.Body.Text, "The system is down.")
			},
		},
		{
			name: "inline reply below a quote is untouched",
			raw: crlf(`Subject: Re: q
Content-Type: text/plain

On Mon, Alice wrote:
> Question one?
Answer one.
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, r.Body.Untrimmed, r.Body.Text)
			},
		},
		{
			name: "signature with twenty lines trimmed, quote above it too",
			raw:  crlf("Subject: sig\nContent-Type: text/plain\n\nMy words.\n\nOn Tue, Bob wrote:\n> quoted\n\n-- \n" + numberedLines(20)),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "My words.", r.Body.Text)
			},
		},
		{
			name: "signature separator with twenty-one lines after it is not a signature",
			raw:  crlf("Subject: sig\nContent-Type: text/plain\n\nMy words.\n-- \n" + numberedLines(21)),
			check: func(t *testing.T, r Result) {
				require.Equal(t, r.Body.Untrimmed, r.Body.Text)
				require.Contains(t, r.Body.Text, "line 21")
			},
		},
		{
			name: "a message that is entirely a quote is not trimmed",
			raw: crlf(`Subject: Fwd
Content-Type: text/plain

-----Original Message-----
From: C

The whole content.
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, r.Body.Untrimmed, r.Body.Text)
				require.Contains(t, r.Body.Text, "The whole content.")
			},
		},
		{
			name: "HTML reply: blockquote history trimmed",
			raw: crlf(`Subject: Re: html
Content-Type: text/html

<div dir="ltr">New words here.</div><br><div class="gmail_quote"><div dir="ltr" class="gmail_attr">On Mon, Jan 2, 2006 at 3:04 PM Alice &lt;<a href="mailto:alice@example.org">alice@example.org</a>&gt; wrote:<br></div><blockquote class="gmail_quote"><div>Old words.</div><div><br></div><div>More old words.</div></blockquote></div>
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "New words here.", r.Body.Text)
				require.Contains(t, r.Body.Untrimmed, "> Old words.")
			},
		},
		{
			name: "HTML signature separator survives whitespace collapsing",
			raw: crlf(`Subject: sig
Content-Type: text/html

<div>Hello.</div><div><br></div>-- <br><div>Alice</div><div>ACME</div>
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Hello.", r.Body.Text)
			},
		},
	}
}

func numberedLines(n int) string {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		b.WriteString("line ")
		b.WriteString(strings.Repeat("I", 0))
		b.WriteString(itoa(i))
		b.WriteString("\n")
	}
	return b.String()
}

func itoa(i int) string {
	if i < 10 {
		return string(rune('0' + i))
	}
	return itoa(i/10) + string(rune('0'+i%10))
}

func TestBody(t *testing.T) {
	t.Parallel()
	runCases(t, bodyCases())
}

func TestTrimQuoted(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, in, want string
		truncated      bool
	}{
		{"nothing to trim", "a\nb", "a\nb", false},
		{"forwarded separator", "note\n---------- Forwarded message ---------\nfwd", "note", false},
		{"separator must be alone on its line", "a line mentioning -----Original Message----- inline\nmore", "a line mentioning -----Original Message----- inline\nmore", false},
		{"topmost separator wins", "top\n-----Original Message-----\nmiddle\n-----Original Message-----\nbottom", "top", false},
		{"quote without attribution kept", "text\n> quoted", "text\n> quoted", false},
		{"attribution must be directly above", "text\nOn Mon, A wrote:\n\n> quoted", "text\nOn Mon, A wrote:\n\n> quoted", false},
		{"wrapped attribution", "text\nOn Mon, Jan 2, 2006 at 3:04 PM Alice <\nalice@example.org> wrote:\n> q", "text", false},
		{"attribution too long", "text\nOn " + strings.Repeat("x", 200) + " wrote:\n> q", "text\nOn " + strings.Repeat("x", 200) + " wrote:\n> q", false},
		{"attribution anchored at the start", "text\nSo On Monday he wrote:\n> q", "text\nSo On Monday he wrote:\n> q", false},
		{"attribution anchored at the end", "text\nOn Monday he wrote: this\n> q", "text\nOn Monday he wrote: this\n> q", false},
		{"double dash without space is not RFC 3676", "text\n--\nsig", "text\n--\nsig", false},
		{"signature", "text\n-- \nsig", "text", false},
		{"signature not applied to a cut text", "text\n-- \nsig", "text\n-- \nsig", true},
		{"separator still applies to a cut text", "text\n-----Original Message-----\nold", "text", true},
		{"only a signature", "-- \nsig", "-- \nsig", false},
		{"whole quote", "On Mon, A wrote:\n> all", "On Mon, A wrote:\n> all", false},
		{"trailing blank lines ignored", "text\n\nOn Mon, A wrote:\n> q\n>\n\n", "text", false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, trimQuoted(tc.in, tc.truncated))
		})
	}
}

func TestTextBoundCutOnTextElement(t *testing.T) {
	t.Parallel()
	flag := "\U0001F1E9\U0001F1EA"
	cases := []struct {
		name  string
		body  string
		limit int
		want  string
	}{
		{"ascii", "abcdefghij", 5, "abcde"},
		{"regional indicator pair straddles the bound", "abcd" + flag + "z", 5, "abcd"},
		{"combining mark straddles the bound", "abcde\u0301z", 5, "abcd"},
		{"ZWJ sequence straddles the bound", "ab\U0001F468\u200D\U0001F469z", 4, "ab"},
		{"CRLF is one element after normalisation", "ab\r\ncd", 3, "ab"},
		{"exactly at the bound", "abcde", 5, "abcde"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			raw := "Subject: bound\r\nContent-Type: text/plain; charset=utf-8\r\n\r\n" + tc.body
			r := Extract([]byte(raw), Limits{MaxExtractedTextCharacters: tc.limit})
			require.Equal(t, tc.want, r.Body.Untrimmed)
			require.Equal(t, tc.want != strings.ReplaceAll(tc.body, "\r\n", "\n"), r.Body.Truncated)
			require.LessOrEqual(t, utf8.RuneCountInString(r.Body.Untrimmed), tc.limit)
			// Ends on a boundary: the kept text is a whole number of the
			// original's text elements.
			require.True(t, strings.HasPrefix(strings.ReplaceAll(tc.body, "\r\n", "\n"), r.Body.Untrimmed))
			require.Equal(t, uniseg.GraphemeClusterCount(r.Body.Untrimmed), countLeadingClusters(strings.ReplaceAll(tc.body, "\r\n", "\n"), r.Body.Untrimmed))
		})
	}
}

// countLeadingClusters counts the text elements of full that make up prefix,
// or -1 when prefix ends inside one.
func countLeadingClusters(full, prefix string) int {
	n, pos := 0, 0
	state := -1
	rest := full
	for pos < len(prefix) && rest != "" {
		var c string
		c, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		pos += len(c)
		n++
	}
	if pos != len(prefix) {
		return -1
	}
	return n
}

// Not parallel: testing.AllocsPerRun refuses to run in a parallel test.
func TestTextBoundWhileAccumulating(t *testing.T) {
	// A body far above the bound costs the bound: allocations do not grow
	// with the body.
	small := plainMessage(strings.Repeat("word ", 2_000))
	large := plainMessage(strings.Repeat("word ", 200_000))
	lim := Limits{MaxExtractedTextCharacters: 1000}
	var rs, rl Result
	as := testing.AllocsPerRun(5, func() { rs = Extract(small, lim) })
	al := testing.AllocsPerRun(5, func() { rl = Extract(large, lim) })
	require.True(t, rs.Body.Truncated)
	require.True(t, rl.Body.Truncated)
	require.Equal(t, rs.Body.Untrimmed, rl.Body.Untrimmed)
	require.LessOrEqual(t, al, as*1.2+10, "allocations must not grow with the body: small %v, large %v", as, al)

	htmlSmall := htmlMessage(strings.Repeat("<p>word</p>\n", 2_000))
	htmlLarge := htmlMessage(strings.Repeat("<p>word</p>\n", 100_000))
	var hs, hl Result
	ahs := testing.AllocsPerRun(3, func() { hs = Extract(htmlSmall, lim) })
	ahl := testing.AllocsPerRun(3, func() { hl = Extract(htmlLarge, lim) })
	require.True(t, hs.Body.Truncated && hl.Body.Truncated)
	require.Equal(t, hs.Body.Untrimmed, hl.Body.Untrimmed)
	require.LessOrEqual(t, utf8.RuneCountInString(hl.Body.Untrimmed), 1000)
	// Past the bound the tokenizer keeps scanning for cid: references,
	// but without allocating per token.
	require.LessOrEqual(t, ahl, ahs*1.2+10, "HTML allocations must not grow with the body: small %v, large %v", ahs, ahl)
}

func plainMessage(body string) []byte {
	return []byte("Subject: big\r\nContent-Type: text/plain\r\n\r\n" + body)
}

func htmlMessage(body string) []byte {
	return []byte("Subject: big\r\nContent-Type: text/html\r\n\r\n<html><body>" + body + "</body></html>")
}
