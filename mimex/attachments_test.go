package mimex

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func itemNames(r Result) []string {
	var out []string
	for _, a := range r.Attachments.Items {
		out = append(out, a.FileName)
	}
	return out
}

const pdfB64 = "JVBERi0xLjQKJcfsj6IKMSAwIG9iago8PC9UeXBlL0NhdGFsb2c+PgplbmRvYmoKdHJhaWxlcjw8L1Jvb3QgMSAwIFI+PgolJUVPRgo="

var pdfLen = func() int64 {
	b, _ := base64.StdEncoding.DecodeString(pdfB64)
	return int64(len(b))
}()

func attachmentCases() []tcase {
	return []tcase{
		{
			name: "body plus PDF: the body is not an attachment",
			raw: crlf(`From: a@example.org
Subject: report
Content-Type: multipart/mixed; boundary="b1"

--b1
Content-Type: text/plain; charset=utf-8

Please find the report attached.
--b1
Content-Type: application/pdf; name="report.pdf"
Content-Disposition: attachment; filename="report.pdf"
Content-Transfer-Encoding: base64

` + pdfB64[:40] + `
` + pdfB64[40:] + `
--b1--
`),
			check: func(t *testing.T, r Result) {
				require.True(t, r.Readable)
				require.Equal(t, 1, r.Attachments.Count)
				require.True(t, r.Attachments.HasAttachments())
				a := r.Attachments.Items[0]
				require.Equal(t, "report.pdf", a.FileName)
				require.Equal(t, "application/pdf", a.MediaType)
				require.Equal(t, "attachment", a.Disposition)
				require.Equal(t, pdfLen, a.DecodedSize, "the decoded octet count, not the base64 length")
				require.Equal(t, pdfLen, r.Attachments.TotalDecodedSize)
				require.False(t, a.FileNameRepaired)
				require.Equal(t, BodyText, r.Body.State)
				require.Equal(t, "Please find the report attached.", r.Body.Text)
			},
		},
		{
			name: "unquoted boundary with equals sign and quoted-printable size",
			raw: crlf(`Subject: outlook style
Content-Type: multipart/mixed; boundary=----=_NextPart_000_0001

------=_NextPart_000_0001
Content-Type: text/plain

body
------=_NextPart_000_0001
Content-Type: text/csv; name=data.csv
Content-Transfer-Encoding: quoted-printable

a=3Db,c=
d
------=_NextPart_000_0001--
`),
			check: func(t *testing.T, r Result) {
				require.True(t, r.Readable)
				require.Equal(t, []string{"data.csv"}, itemNames(r))
				require.Equal(t, int64(len("a=b,cd")), r.Attachments.Items[0].DecodedSize)
			},
		},
		{
			name: "S/MIME signed: no smime.p7s attachment, signature marker",
			raw: crlf(`Subject: signed
Content-Type: multipart/signed; protocol="application/pkcs7-signature"; micalg=sha-256; boundary="s1"

--s1
Content-Type: text/plain

Signed words.
--s1
Content-Type: application/pkcs7-signature; name="smime.p7s"
Content-Disposition: attachment; filename="smime.p7s"
Content-Transfer-Encoding: base64

MIAGCSqGSIb3DQEHAqCAMIACAQExDzANBglghkgBZQMEAgEFADCABgkqhkiG9w0BBwEAAA==
--s1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.False(t, r.Attachments.HasAttachments())
				require.True(t, r.Attachments.UnverifiedSignature)
				require.False(t, r.Attachments.Encrypted)
				require.Equal(t, "Signed words.", r.Body.Text)
			},
		},
		{
			name: "signed content classified normally",
			raw: crlf(`Subject: signed with file
Content-Type: multipart/signed; protocol="application/x-pkcs7-signature"; boundary="s1"

--s1
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

See file.
--m1
Content-Type: application/zip; name="a.zip"

zipzip
--m1--

--s1
Content-Type: application/x-pkcs7-signature; name="smime.p7s"

sig
--s1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"a.zip"}, itemNames(r))
				require.True(t, r.Attachments.UnverifiedSignature)
				require.Equal(t, "See file.", r.Body.Text)
			},
		},
		{
			name: "signed container with three children classifies the extra",
			raw: crlf(`Subject: smuggled
Content-Type: multipart/signed; protocol="application/pgp-signature"; boundary="s1"

--s1
Content-Type: text/plain

Signed.
--s1
Content-Type: application/pgp-signature

-----BEGIN PGP SIGNATURE-----
--s1
Content-Type: application/octet-stream; name="smuggled.exe"

MZ
--s1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"smuggled.exe"}, itemNames(r))
				require.Equal(t, int64(2), r.Attachments.TotalDecodedSize)
				require.True(t, r.Attachments.UnverifiedSignature)
			},
		},
		{
			name: "PGP/MIME encrypted: no file, encrypted marker, no text",
			raw: crlf(`Subject: secret
Content-Type: multipart/encrypted; protocol="application/pgp-encrypted"; boundary="e1"

--e1
Content-Type: application/pgp-encrypted

Version: 1
--e1
Content-Type: application/octet-stream; name="encrypted.asc"
Content-Disposition: inline; filename="encrypted.asc"

-----BEGIN PGP MESSAGE-----
hQEMA
-----END PGP MESSAGE-----
--e1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.True(t, r.Attachments.Encrypted)
				require.Equal(t, BodyEncrypted, r.Body.State)
				require.Empty(t, r.Body.Text)
			},
		},
		{
			name: "bare multipart/encrypted without protocol: its children are still classified",
			raw: crlf(`Subject: bare
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

Hello.
--m1
Content-Type: multipart/encrypted; boundary="e1"

--e1
Content-Type: application/pgp-encrypted

Version: 1
--e1
Content-Type: application/octet-stream; name="payload.bin"

not ciphertext at all
--e1--

--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"payload.bin"}, itemNames(r), "one header line does not take a file out of the summary")
				require.True(t, r.Attachments.Encrypted, "the ciphertext control part is still caught by the leaf rule")
				require.Equal(t, BodyText, r.Body.State)
				require.Equal(t, "Hello.", r.Body.Text)
			},
		},
		{
			name: "bare multipart/signed without protocol: signature caught by the leaf rule",
			raw: crlf(`Subject: bare signed
Content-Type: multipart/signed; boundary="s1"

--s1
Content-Type: text/plain

Words.
--s1
Content-Type: application/pgp-signature; name="signature.asc"
Content-Disposition: attachment; filename="signature.asc"

sig
--s1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.True(t, r.Attachments.UnverifiedSignature)
				require.Equal(t, "Words.", r.Body.Text)
			},
		},
		{
			name: "opaque pkcs7-mime enveloped-data",
			raw: crlf(`Subject: smime encrypted
Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"
Content-Disposition: attachment; filename="smime.p7m"
Content-Transfer-Encoding: base64

MIAGCSqGSIb3DQEHA6CAMIACAQAxggFW
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.True(t, r.Attachments.Encrypted)
				require.False(t, r.Attachments.UnverifiedSignature)
				require.Equal(t, BodyEncrypted, r.Body.State)
			},
		},
		{
			name: "opaque x-pkcs7-mime authEnveloped-data",
			raw: crlf(`Subject: smime auth encrypted
Content-Type: application/x-pkcs7-mime; smime-type=authEnveloped-data; name="smime.p7m"

xxxx
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.True(t, r.Attachments.Encrypted)
				require.Equal(t, BodyEncrypted, r.Body.State)
			},
		},
		{
			name: "opaque pkcs7-mime signed-data",
			raw: crlf(`Subject: smime opaque signed
Content-Type: application/pkcs7-mime; smime-type=signed-data; name="smime.p7m"

xxxx
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.False(t, r.Attachments.Encrypted)
				require.True(t, r.Attachments.UnverifiedSignature)
				require.Equal(t, BodyEncrypted, r.Body.State, "the body is sealed inside the CMS structure")
			},
		},
		{
			name: "forwarded encrypted attachment: marker set, own body readable",
			raw: crlf(`Subject: fwd secret
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

Forwarding the encrypted one, I cannot read it either.
--m1
Content-Type: application/pkcs7-mime; smime-type=enveloped-data; name="smime.p7m"
Content-Disposition: attachment; filename="smime.p7m"

xxxx
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.True(t, r.Attachments.Encrypted, "the message carries encrypted content")
				require.Equal(t, 0, r.Attachments.Count)
				require.Equal(t, BodyText, r.Body.State, "its own body is not encrypted")
				require.Equal(t, "Forwarding the encrypted one, I cannot read it either.", r.Body.Text)
			},
		},
		{
			name: "mixed: body is the first child resolved again",
			raw: crlf(`Subject: mixed alt
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: multipart/alternative; boundary="a1"

--a1
Content-Type: text/plain

Plain words.
--a1
Content-Type: text/html

<p>Html words.</p>
--a1--

--m1
Content-Type: text/plain; name="notes.txt"
Content-Disposition: attachment; filename="notes.txt"

Attached notes must not be body text.
--m1
Content-Type: text/html; name="page.html"

<p>An attached page.</p>
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"notes.txt", "page.html"}, itemNames(r))
				require.Equal(t, "Plain words.", r.Body.Text)
				require.False(t, r.Body.Lossy)
			},
		},
		{
			name: "related: the start parameter names the body",
			raw: crlf(`Subject: related start
Content-Type: multipart/related; type="text/html"; start="<root@example.test>"; boundary="r1"

--r1
Content-Type: image/png
Content-ID: <img1@example.test>

PNGDATA
--r1
Content-Type: text/html; charset=utf-8
Content-ID: <root@example.test>

<html><body><p>Look:</p><img src="cid:img1@example.test"></body></html>
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.Equal(t, 1, r.Attachments.InlineResourceCount)
				require.Equal(t, BodyText, r.Body.State)
				require.True(t, r.Body.Lossy)
				require.Equal(t, "Look:", r.Body.Text)
			},
		},
		{
			name: "related: a start naming no part falls back to the first child",
			raw: crlf(`Subject: related bad start
Content-Type: multipart/related; start="<missing@example.test>"; boundary="r1"

--r1
Content-Type: text/html

<p>Root by position.</p><img src="cid:img1@example.test">
--r1
Content-Type: image/png
Content-ID: <img1@example.test>

PNGDATA
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count)
				require.Equal(t, 1, r.Attachments.InlineResourceCount)
				require.Equal(t, "Root by position.", r.Body.Text)
			},
		},
		{
			name: "related without start: the first child, others by reference",
			raw: crlf(`Subject: related
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

<p>Hi</p><img src="cid:used@example.test">
--r1
Content-Type: image/png
Content-ID: <used@example.test>

PNG
--r1
Content-Type: image/png; name="unused.png"
Content-ID: <unused@example.test>

PNG
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 1, r.Attachments.InlineResourceCount)
				require.Equal(t, []string{"unused.png"}, itemNames(r), "a part no body references is an attachment")
			},
		},
		{
			name: "alternative: every member is body, calendar invite included",
			raw: crlf(`Subject: Invitation
Content-Type: multipart/alternative; boundary="a1"

--a1
Content-Type: text/plain

You are invited.
--a1
Content-Type: text/html

<p>You are <b>invited</b>.</p>
--a1
Content-Type: text/calendar; method=REQUEST; charset=utf-8

BEGIN:VCALENDAR
END:VCALENDAR
--a1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.Count, "an Outlook-style invitation is a body alternative")
				require.Equal(t, "You are invited.", r.Body.Text)
			},
		},
		{
			name: "separate calendar part is an attachment",
			raw: crlf(`Subject: Invitation
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

See the invite.
--m1
Content-Type: text/calendar; method=REQUEST; name="invite.ics"

BEGIN:VCALENDAR
END:VCALENDAR
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, []string{"invite.ics"}, itemNames(r))
				require.True(t, r.Attachments.Items[0].Calendar)
			},
		},
		{
			name: "cid referenced in an attribute of an HTML alternative hides an image sent beside it",
			raw: crlf(`Subject: apple style
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: multipart/alternative; boundary="a1"

--a1
Content-Type: text/plain

Logo below.
--a1
Content-Type: text/html

<p>Logo below.</p><img src=" CID:logo@example.test ">
--a1--

--m1
Content-Type: image/png; name="logo.png"
Content-Disposition: inline; filename="logo.png"
Content-ID: <logo@example.test>

PNG
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 1, r.Attachments.InlineResourceCount)
				require.Equal(t, 0, r.Attachments.Count)
			},
		},
		{
			name: "cid only in visible text, a comment, script or a non-URL attribute does not hide the part",
			raw: crlf(`Subject: crafted
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

<html><head><title>cid:hidden@example.test</title></head><body>
<p>Please ignore cid:hidden@example.test in this text.</p>
<!-- <img src="cid:hidden@example.test"> -->
<script>var u = "cid:hidden@example.test";</script>
<p title="see cid:hidden@example.test">x</p>
<noscript><img src="cid:hidden@example.test"></noscript>
</body></html>
--r1
Content-Type: application/x-msdownload
Content-ID: <hidden@example.test>

MZ
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.InlineResourceCount)
				require.Equal(t, 1, r.Attachments.Count)
				require.Equal(t, "application/x-msdownload", r.Attachments.Items[0].MediaType)
				require.True(t, r.Attachments.Items[0].Unnamed)
				require.NotContains(t, r.Body.Untrimmed, "var u", "script content is not text")
			},
		},
		{
			name: "cid in a style element and a style attribute counts, in a CSS comment it does not",
			raw: crlf(`Subject: css
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

<html><head><style>
body { background: url( 'cid:bg@example.test' ); }
/* .x { background: url(cid:commented@example.test) } */
@import "cid:sheet@example.test";
</style></head>
<body><div style="background-image:url(cid:div@example.test)">Styled</div></body></html>
--r1
Content-Type: image/png
Content-ID: <bg@example.test>

PNG
--r1
Content-Type: image/png
Content-ID: <div@example.test>

PNG
--r1
Content-Type: text/css
Content-ID: <sheet@example.test>

p{}
--r1
Content-Type: image/png; name="commented.png"
Content-ID: <commented@example.test>

PNG
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 3, r.Attachments.InlineResourceCount)
				require.Equal(t, []string{"commented.png"}, itemNames(r))
				require.Equal(t, "Styled", r.Body.Text)
			},
		},
		{
			name: "percent-encoded cid URL",
			raw: crlf(`Subject: pct
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

<img src="cid:logo%2Fdark@example.test"><img srcset="cid:a%20b@example.test 1x, https://example.test/x.png 2x">
--r1
Content-Type: image/png
Content-ID: <logo/dark@example.test>

PNG
--r1
Content-Type: image/png
Content-ID: <a b@example.test>

PNG
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 2, r.Attachments.InlineResourceCount)
				require.Equal(t, 0, r.Attachments.Count)
			},
		},
		{
			name: "explicit attachment disposition overrides a reference",
			raw: crlf(`Subject: explicit
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

<img src="cid:chart@example.test">
--r1
Content-Type: image/png; name="chart.png"
Content-Disposition: attachment; filename="chart.png"
Content-ID: <chart@example.test>

PNG
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.InlineResourceCount)
				require.Equal(t, []string{"chart.png"}, itemNames(r))
			},
		},
		{
			name: "an attached HTML file's references do not count",
			raw: crlf(`Subject: attached html
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

Body.
--m1
Content-Type: text/html; name="page.html"
Content-Disposition: attachment; filename="page.html"

<img src="cid:pic@example.test">
--m1
Content-Type: image/png
Content-ID: <pic@example.test>

PNG
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 0, r.Attachments.InlineResourceCount)
				require.Equal(t, 2, r.Attachments.Count)
			},
		},
		{
			name: "nested message/rfc822 is one attachment, not recursed into",
			raw: crlf(`Subject: Fwd: thread
Content-Type: multipart/mixed; boundary="outer"

--outer
Content-Type: text/plain

Forwarding.
--outer
Content-Type: message/rfc822

Subject: inner
Content-Type: multipart/mixed; boundary="inner"

--inner
Content-Type: text/plain

Inner body.
--inner
Content-Type: application/pdf; name="inner1.pdf"

PDF1
--inner
Content-Type: application/pdf; name="inner2.pdf"

PDF2
--inner--
--outer--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 1, r.Attachments.Count)
				a := r.Attachments.Items[0]
				require.True(t, a.NestedMessage)
				require.Equal(t, "message/rfc822", a.MediaType)
				require.True(t, a.Unnamed)
				inner := crlf(`Subject: inner
Content-Type: multipart/mixed; boundary="inner"

--inner
Content-Type: text/plain

Inner body.
--inner
Content-Type: application/pdf; name="inner1.pdf"

PDF1
--inner
Content-Type: application/pdf; name="inner2.pdf"

PDF2
--inner--`)
				require.Equal(t, int64(len(inner)), a.DecodedSize, "an unencoded nested message measures its transmitted octets")
				require.Equal(t, "Forwarding.", r.Body.Text)
			},
		},
		{
			name: "TNEF is one attachment marked unexpanded",
			raw: crlf(`Subject: outlook
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

See attached.
--m1
Content-Type: application/ms-tnef; name="winmail.dat"
Content-Disposition: attachment; filename="winmail.dat"
Content-Transfer-Encoding: base64

eJ8+IgAA
--m1
Content-Type: application/octet-stream; name="WINMAIL.DAT"

x
--m1--
`),
			check: func(t *testing.T, r Result) {
				require.True(t, r.Attachments.TNEF)
				require.Equal(t, 2, r.Attachments.Count)
				for _, a := range r.Attachments.Items {
					require.True(t, a.TNEFUnexpanded)
				}
				require.Equal(t, int64(6), r.Attachments.Items[0].DecodedSize)
			},
		},
		{
			name: "inline-only message has no attachments",
			raw: crlf(`Subject: inline only
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

<img src="cid:a@x"><img src='cid:b@x'>
--r1
Content-Type: image/gif
Content-ID: <a@x>
Content-Disposition: inline

GIF
--r1
Content-Type: image/gif
Content-ID: b@x

GIF
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.False(t, r.Attachments.HasAttachments())
				require.Equal(t, 2, r.Attachments.InlineResourceCount)
				require.Equal(t, int64(0), r.Attachments.TotalDecodedSize)
				require.Equal(t, BodyNoTextualBody, r.Body.State, "an HTML body with no words")
			},
		},
		{
			name: "digest children default to message/rfc822",
			raw: crlf(`Subject: digest
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

Digest follows.
--m1
Content-Type: multipart/digest; boundary="d1"

--d1

Subject: one

First.
--d1

Subject: two

Second.
--d1--

--m1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, 2, r.Attachments.Count)
				for _, a := range r.Attachments.Items {
					require.True(t, a.NestedMessage)
				}
			},
		},
		{
			name: "invalid Content-Type is text/plain",
			raw: crlf(`Subject: broken type
Content-Type: garbage

Readable anyway.
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, "Readable anyway.", r.Body.Text)
			},
		},
		{
			name: "truncated message keeps what was read",
			raw: crlf(`Subject: cut
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/plain

Body.
--m1
Content-Type: application/pdf; name="cut.pdf"

PARTIAL`),
			check: func(t *testing.T, r Result) {
				require.True(t, r.Readable)
				require.Equal(t, []string{"cut.pdf"}, itemNames(r))
				require.Equal(t, "Body.", r.Body.Text)
			},
		},
		{
			name: "reference scan defeated while a part depends on it",
			raw: crlf(`Subject: huge token
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

<p>Start</p><img alt="` + strings.Repeat("A", MaxReferenceScanTokenBytes+10) + `" src="cid:x@example.test">
--r1
Content-Type: image/png
Content-ID: <x@example.test>

PNG
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.False(t, r.Readable)
				require.Equal(t, ReferenceScanFailed, r.Failure)
				require.Equal(t, BodyNotExtracted, r.Body.State)
			},
		},
		{
			name: "too many distinct references defeat the scan",
			raw: crlf(`Subject: many refs
Content-Type: multipart/related; boundary="r1"

--r1
Content-Type: text/html

` + manyRefs(MaxReferenceCount+1) + `
--r1
Content-Type: image/png
Content-ID: <unreferenced@example.test>

PNG
--r1--
`),
			check: func(t *testing.T, r Result) {
				require.Equal(t, ReferenceScanFailed, r.Failure)
			},
		},
	}
}

func manyRefs(n int) string {
	var b strings.Builder
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "<img src=\"cid:r%d@x\">\n", i)
	}
	return b.String()
}

func TestAttachments(t *testing.T) {
	t.Parallel()
	runCases(t, attachmentCases())
}

func TestReferenceScanFailureIrrelevantWithoutCandidates(t *testing.T) {
	t.Parallel()
	raw := crlf(`Subject: huge token, nothing depends on it
Content-Type: multipart/mixed; boundary="m1"

--m1
Content-Type: text/html

<p>Start words</p><img alt="` + strings.Repeat("A", MaxReferenceScanTokenBytes+10) + `">
--m1
Content-Type: application/pdf; name="a.pdf"
Content-Disposition: attachment; filename="a.pdf"
Content-ID: <a@x>

PDF
--m1--
`)
	r := Extract([]byte(raw), Limits{})
	require.True(t, r.Readable)
	require.Equal(t, []string{"a.pdf"}, itemNames(r))
	require.Equal(t, "Start words", r.Body.Text)
	require.True(t, r.Body.Truncated, "the tokenizer stopped before the end of the part")
}
