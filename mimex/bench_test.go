package mimex

import (
	"encoding/base64"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

const benchHeader = `Return-Path: <alice@example.org>
Delivered-To: bob@example.net
Received: from mx1.example.net (mx1.example.net [192.0.2.10])
	by imap.example.net (Postfix) with ESMTPS id 4ABCD123
	for <bob@example.net>; Tue, 3 Jan 2006 10:00:02 +0000 (UTC)
Received: from mail.example.org (mail.example.org [198.51.100.7])
	by mx1.example.net (Postfix) with ESMTPS id 4ABCD000
	for <bob@example.net>; Tue, 3 Jan 2006 10:00:01 +0000 (UTC)
DKIM-Signature: v=1; a=rsa-sha256; c=relaxed/relaxed; d=example.org; s=mail;
	h=from:to:cc:subject:date:message-id:in-reply-to:references;
	bh=47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU=;
	b=dGhpcyBpcyBub3QgYSByZWFsIHNpZ25hdHVyZSBidXQgaXQgbG9va3MgbGlrZSBvbmU=
From: Alice Example <alice@example.org>
To: Bob Example <bob@example.net>, "Carol, Team" <carol@example.net>
Cc: dave@example.com
Subject: =?utf-8?q?Re=3A_Quarterly_planning_=E2=80=94_next_steps?=
Date: Tue, 3 Jan 2006 11:00:00 +0100
Message-ID: <CAF123.456@mail.example.org>
In-Reply-To: <CAE999.111@mail.example.net>
References: <CAD000.000@mail.example.org> <CAE999.111@mail.example.net>
MIME-Version: 1.0
`

func prose(rng *rand.Rand, words int) string {
	vocab := strings.Fields("the plan quarter budget review team meeting next steps agreed schedule deliver draft report customer feedback priority risk owner date update")
	var b strings.Builder
	for i := 0; i < words; i++ {
		if i > 0 {
			if i%14 == 0 {
				b.WriteString(".\n")
			} else {
				b.WriteByte(' ')
			}
		}
		b.WriteString(vocab[rng.IntN(len(vocab))])
	}
	b.WriteString(".")
	return b.String()
}

func wrap76(s string) string {
	var b strings.Builder
	for len(s) > 76 {
		b.WriteString(s[:76])
		b.WriteString("\n")
		s = s[76:]
	}
	b.WriteString(s)
	return b.String()
}

func randomB64(rng *rand.Rand, n int) string {
	buf := make([]byte, n)
	for i := range buf {
		buf[i] = byte(rng.Uint32())
	}
	return wrap76(base64.StdEncoding.EncodeToString(buf))
}

// realisticMessage builds a reply with plain and HTML alternatives, a quoted
// history and, when attachBytes > 0, an inline logo and a PDF of about that
// many decoded bytes.
func realisticMessage(words, attachBytes int) []byte {
	rng := rand.New(rand.NewPCG(1, 2))
	text := prose(rng, words)
	quoted := "> " + strings.ReplaceAll(prose(rng, words/2), "\n", "\n> ")
	var htmlBody strings.Builder
	for _, para := range strings.Split(text, "\n") {
		fmt.Fprintf(&htmlBody, "<p style=3D\"margin:0 0 8px 0;font-family:Arial\">%s</p>\n", para)
	}
	var b strings.Builder
	b.WriteString(benchHeader)
	b.WriteString("Content-Type: multipart/mixed; boundary=\"mixed-1\"\n\n--mixed-1\n")
	b.WriteString("Content-Type: multipart/related; boundary=\"rel-1\"\n\n--rel-1\n")
	b.WriteString("Content-Type: multipart/alternative; boundary=\"alt-1\"\n\n--alt-1\n")
	b.WriteString("Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: 8bit\n\n")
	b.WriteString(text + "\n\n-- \nAlice Example\nPlanning\n\nOn Mon, 2 Jan 2006 at 09:00, Bob Example <bob@example.net> wrote:\n" + quoted + "\n")
	b.WriteString("--alt-1\nContent-Type: text/html; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n")
	b.WriteString("<html><head><style>p{color:#333}</style></head><body>\n" + htmlBody.String() +
		"<img src=3D\"cid:logo@example.org\" width=3D\"80\"><br><div>-- <br>Alice Example</div></body></html>\n")
	b.WriteString("--alt-1--\n\n--rel-1\nContent-Type: image/png\nContent-ID: <logo@example.org>\nContent-Transfer-Encoding: base64\n\n")
	b.WriteString(randomB64(rng, 600) + "\n--rel-1--\n")
	if attachBytes > 0 {
		b.WriteString("\n--mixed-1\nContent-Type: application/pdf; name=\"Q1 plan.pdf\"\nContent-Disposition: attachment; filename=\"Q1 plan.pdf\"\nContent-Transfer-Encoding: base64\n\n")
		b.WriteString(randomB64(rng, attachBytes) + "\n")
	}
	b.WriteString("--mixed-1--\n")
	return []byte(crlf(b.String()))
}

func TestBenchmarkMessagesAreRealistic(t *testing.T) {
	t.Parallel()
	small := realisticMessage(380, 0)
	large := realisticMessage(380, 740_000)
	require.InDelta(t, 10<<10, len(small), 3<<10)
	require.InDelta(t, 1<<20, len(large), 64<<10)
	for _, raw := range [][]byte{small, large} {
		r := Extract(raw, Limits{})
		checkInvariants(t, r, Limits{})
		require.True(t, r.Readable)
		require.Equal(t, 1, r.Attachments.InlineResourceCount)
		require.Len(t, r.Participants, 4)
		require.NotContains(t, r.Body.Text, "Alice Example\nPlanning", "signature trimmed")
		require.NotContains(t, r.Body.Text, "wrote:", "quote trimmed")
	}
	r := Extract(large, Limits{})
	require.Equal(t, []string{"Q1 plan.pdf"}, itemNames(r))
	require.Equal(t, int64(740_000), r.Attachments.TotalDecodedSize)
}

func BenchmarkExtract(b *testing.B) {
	for _, bc := range []struct {
		name string
		raw  []byte
	}{
		{"10KB", realisticMessage(380, 0)},
		{"1MB", realisticMessage(380, 740_000)},
		{"5000parts-limit1000", flatMessage(5000)},
		{"nesting10000-limit30", nestedMessage(10_000)},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.raw)))
			for b.Loop() {
				Extract(bc.raw, Limits{})
			}
		})
	}
}
