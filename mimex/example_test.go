package mimex_test

import (
	"fmt"
	"strings"

	"github.com/mailfathom/mailfathom/mimex"
)

func ExampleExtract() {
	raw := strings.ReplaceAll(`From: Alice <alice@example.org>
To: bob@example.net
Subject: Re: report
Date: Tue, 3 Jan 2006 11:00:00 +0100
Message-ID: <reply-1@example.org>
References: <report-1@example.net>
Content-Type: multipart/mixed; boundary="b"

--b
Content-Type: text/plain

Thanks, looks good.

On Mon, 2 Jan 2006, Bob wrote:
> Report attached.
--b
Content-Type: application/pdf; name="report.pdf"
Content-Transfer-Encoding: base64

JVBERi0xLjQK
--b--
`, "\n", "\r\n")

	r := mimex.Extract([]byte(raw), mimex.DefaultLimits())
	fmt.Println(r.Readable, r.Subject, r.SentAt.Format("2006-01-02 15:04 MST"))
	for _, p := range r.Participants {
		fmt.Println(p.Role, p.Comparison)
	}
	fmt.Println(r.MessageID, r.References)
	fmt.Println(r.Attachments.Count, r.Attachments.Items[0].FileName, r.Attachments.Items[0].DecodedSize)
	fmt.Printf("%s %q\n", r.Body.State, r.Body.Text)
	// Output:
	// true Re: report 2006-01-03 10:00 UTC
	// From ALICE@EXAMPLE.ORG
	// To BOB@EXAMPLE.NET
	// reply-1@example.org [report-1@example.net]
	// 1 report.pdf 9
	// Text "Thanks, looks good."
}
