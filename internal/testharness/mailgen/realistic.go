package mailgen

import (
	"bytes"
	"encoding/base64"
	"fmt"
	"math"
	"math/rand/v2"
	"mime"
	"mime/quotedprintable"
	"strings"
	"time"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
)

// Kind is one shape of message in a realistic mailbox.
type Kind int

// The kinds Realistic generates, each in the share of a measured real
// mailbox that Mix gives.
const (
	Alternative   Kind = iota // multipart/alternative: text and HTML
	Plain                     // text/plain
	Newsletter                // HTML newsletter with a text alternative
	Attachment                // multipart/mixed with one to three attachments
	MailingList               // text/plain with list headers and footer
	Related                   // multipart/related: HTML with inline images
	Forwarded                 // a message/rfc822 part
	SMIMESigned               // multipart/signed, application/pkcs7-signature
	Calendar                  // an invitation: text/plain and text/calendar
	PGPEncrypted              // multipart/encrypted, armored
	InlineForward             // text/plain quoting a forwarded message inline
	PGPSigned                 // multipart/signed, application/pgp-signature
	Bounce                    // multipart/report, a delivery status notification
)

var kindNames = [...]string{"alternative", "plain", "newsletter", "attachment", "mailing-list",
	"related", "forwarded", "smime-signed", "calendar", "pgp-encrypted", "inline-forward", "pgp-signed", "bounce"}

func (k Kind) String() string {
	if k >= 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// Mix is each kind's share of a realistic mailbox, in percent; the shares
// add up to 100.
var Mix = [...]struct {
	Kind    Kind
	Percent int
}{
	{Alternative, 30}, {Plain, 21}, {Newsletter, 9}, {Attachment, 12}, {MailingList, 6},
	{Related, 5}, {Forwarded, 4}, {SMIMESigned, 4}, {Calendar, 3}, {PGPEncrypted, 2},
	{InlineForward, 2}, {PGPSigned, 1}, {Bounce, 1},
}

// RealisticKind returns the kind of message n of a realistic corpus with
// the given seed.
func RealisticKind(seed uint64, n int) Kind {
	p := int(rand.New(rand.NewPCG(seed, uint64(n)^0x6b696e64)).IntN(100))
	for _, m := range Mix {
		if p < m.Percent {
			return m.Kind
		}
		p -= m.Percent
	}
	return Plain
}

// Realistic returns message n of a realistic corpus with the given seed:
// the kinds of Mix, text that is mostly small and an attachment tail that
// carries the size (median about 10 KB, mean about 70 KB, p99 about
// 1.2 MB), a quoted reply or a signature at the end of about a third, and
// non-ASCII headers and bodies in several charsets and transfer encodings.
// Messages are deterministic for (seed, n) and use CRLF line endings.
//
// Realistic does not produce malformed MIME; tests of broken input build
// their own.
func Realistic(seed uint64, n int) []byte {
	g := &generator{rng: rand.New(rand.NewPCG(seed, uint64(n))), seed: seed, n: n}
	g.lang = languages[g.rng.IntN(len(languages))]
	if g.rng.IntN(100) < 55 {
		g.lang = languages[0] // most mail is in English
	}
	var b bytes.Buffer
	g.message(&b, RealisticKind(seed, n), 0)
	return b.Bytes()
}

// language is a body language and the charsets it is sent in.
type language struct {
	name     string
	words    []string
	charsets []string
}

var languages = []language{
	{"en", strings.Fields("the meeting report project budget review thanks regards please find attached schedule update team client invoice quarter results deadline proposal feedback tomorrow call agenda notes customer release"), []string{"us-ascii", "utf-8"}},
	{"de", strings.Fields("Besprechung Bericht Übersicht für Größe Straße Grüße können müssen Rückmeldung Termin Änderung Angebot Kunde nächste Woche bitte danke schön"), []string{"utf-8", "iso-8859-1"}},
	{"fr", strings.Fields("réunion rapport budget révision merci cordialement été prochaine semaine déjà très bientôt reçu ci-joint à propos équipe client"), []string{"utf-8", "iso-8859-1", "windows-1252"}},
	{"ru", strings.Fields("встреча отчёт проект бюджет спасибо пожалуйста неделя клиент договор сроки команда вопрос ответ документ"), []string{"utf-8", "koi8-r"}},
	{"ja", strings.Fields("会議 報告 予算 確認 よろしく お願い します 来週 資料 添付 顧客 契約 担当 返信 予定"), []string{"utf-8", "iso-2022-jp"}},
}

var encoders = map[string]encoding.Encoding{
	"iso-8859-1":   charmap.ISO8859_1,
	"windows-1252": charmap.Windows1252,
	"koi8-r":       charmap.KOI8R,
	"iso-2022-jp":  japanese.ISO2022JP,
}

type generator struct {
	rng  *rand.Rand
	seed uint64
	n    int
	lang language
}

// logNormal draws a size with the given median and shape, bounded to
// [lo, hi].
func (g *generator) logNormal(median float64, sigma float64, lo, hi int) int {
	v := int(median * math.Exp(sigma*g.rng.NormFloat64()))
	return min(max(v, lo), hi)
}

func (g *generator) sentence(words []string) string {
	k := 5 + g.rng.IntN(12)
	parts := make([]string, k)
	for i := range parts {
		parts[i] = words[g.rng.IntN(len(words))]
	}
	s := strings.Join(parts, " ")
	if g.lang.name == "ja" {
		return strings.ReplaceAll(s, " ", "") + "。"
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// prose returns about size bytes of paragraphs in the generator's
// language, lines wrapped below 78 characters.
func (g *generator) prose(size int) string {
	var b strings.Builder
	line := 0
	for b.Len() < size {
		if g.rng.IntN(5) == 0 && b.Len() > 0 {
			b.WriteString("\n\n")
			line = 0
		}
		for _, w := range strings.SplitAfter(g.sentence(g.lang.words), " ") {
			if line+len(w) > 72 {
				b.WriteString("\n")
				line = 0
			}
			b.WriteString(w)
			line += len(w)
		}
		b.WriteString(" ")
		line++
	}
	return strings.TrimRight(b.String(), " ") + "\n"
}

// ending adds a quoted reply or a signature to about a third of bodies.
func (g *generator) ending(text string) string {
	switch g.rng.IntN(6) {
	case 0:
		quoted := g.prose(200 + g.rng.IntN(1500))
		return text + "\nOn " + g.date(-24*time.Hour).Format("Mon, 2 Jan 2006 at 15:04") + ", " + g.person(1).name + " wrote:\n> " +
			strings.ReplaceAll(strings.TrimRight(quoted, "\n"), "\n", "\n> ") + "\n"
	case 1:
		return text + "\n-- \n" + g.person(0).name + "\nExample Trading Ltd · +44 20 7946 0000\n"
	}
	return text
}

type person struct{ name, addr string }

var names = []string{"Alice Martin", "Bob Stone", "Jürgen Müller", "Élodie Durand", "Иван Петров", "山田 太郎", "Carol White", "Dave Brown", "Zoë Clarke", "Ana García"}

func (g *generator) person(salt int) person {
	i := (g.n*7 + salt*3 + g.rng.IntN(3)) % len(names)
	return person{names[i], fmt.Sprintf("user%d@example%d.test", i, i%3)}
}

func (g *generator) date(offset time.Duration) time.Time {
	return time.Date(2024, 1, 1, 8, 0, 0, 0, time.UTC).Add(time.Duration(g.n)*37*time.Minute + offset)
}

// header encodes s as an RFC 2047 encoded word when it is not ASCII.
func (g *generator) header(s string) string {
	for _, r := range s {
		if r >= 0x80 {
			if g.rng.IntN(2) == 0 {
				return mime.QEncoding.Encode("utf-8", s)
			}
			return mime.BEncoding.Encode("utf-8", s)
		}
	}
	return s
}

func (g *generator) address(p person) string {
	return g.header(p.name) + " <" + p.addr + ">"
}

func (g *generator) headers(b *bytes.Buffer, subject string, extra ...string) {
	from, to := g.person(0), g.person(5)
	fmt.Fprintf(b, "Return-Path: <%s>\r\n", from.addr)
	fmt.Fprintf(b, "Received: from mx%d.example.test (mx%d.example.test [192.0.2.%d])\r\n\tby mail.example.test with ESMTPS id %x\r\n\tfor <%s>; %s\r\n",
		g.n%4, g.n%4, g.n%250+1, g.rng.Uint64(), to.addr, g.date(time.Minute).Format(time.RFC1123Z))
	fmt.Fprintf(b, "From: %s\r\n", g.address(from))
	fmt.Fprintf(b, "To: %s\r\n", g.address(to))
	if g.rng.IntN(4) == 0 {
		fmt.Fprintf(b, "Cc: %s\r\n", g.address(g.person(8)))
	}
	fmt.Fprintf(b, "Subject: %s\r\n", g.header(subject))
	fmt.Fprintf(b, "Date: %s\r\n", g.date(0).Format(time.RFC1123Z))
	fmt.Fprintf(b, "Message-ID: <%d.%d.%x@example.test>\r\n", g.seed, g.n, g.rng.Uint32())
	if g.rng.IntN(3) == 0 {
		fmt.Fprintf(b, "In-Reply-To: <%d.%d.0@example.test>\r\n", g.seed, max(0, g.n-1-g.rng.IntN(5)))
	}
	for _, h := range extra {
		b.WriteString(h + "\r\n")
	}
	b.WriteString("MIME-Version: 1.0\r\n")
}

func (g *generator) subject() string {
	return strings.TrimSuffix(strings.TrimSuffix(g.sentence(g.lang.words), "."), "。")
}

// textPart writes a text part's headers and body in one of the language's
// charsets, quoted-printable or base64 when it is not ASCII.
func (g *generator) textPart(b *bytes.Buffer, subtype, text string) {
	charset := g.lang.charsets[g.rng.IntN(len(g.lang.charsets))]
	body := []byte(text)
	if enc, ok := encoders[charset]; ok {
		if out, err := enc.NewEncoder().Bytes(body); err == nil {
			body = out
		} else {
			charset = "utf-8"
		}
	}
	ascii := true
	for _, c := range body {
		if c >= 0x80 {
			ascii = false
			break
		}
	}
	fmt.Fprintf(b, "Content-Type: text/%s; charset=%q\r\n", subtype, charset)
	switch {
	case charset == "iso-2022-jp":
		b.WriteString("Content-Transfer-Encoding: 7bit\r\n\r\n")
		b.Write(crlf(body))
	case ascii:
		b.WriteString("\r\n")
		b.Write(crlf(body))
	case g.rng.IntN(3) == 0:
		b.WriteString("Content-Transfer-Encoding: base64\r\n\r\n")
		writeBase64(b, body)
	default:
		b.WriteString("Content-Transfer-Encoding: quoted-printable\r\n\r\n")
		var qp bytes.Buffer
		w := quotedprintable.NewWriter(&qp)
		_, _ = w.Write(crlf(body))
		_ = w.Close()
		b.Write(qp.Bytes())
		b.WriteString("\r\n")
	}
}

func crlf(b []byte) []byte {
	b = bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n"))
	return bytes.ReplaceAll(b, []byte("\n"), []byte("\r\n"))
}

func writeBase64(b *bytes.Buffer, raw []byte) {
	enc := base64.StdEncoding.EncodeToString(raw)
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteString("\r\n")
		enc = enc[76:]
	}
	b.WriteString(enc)
	b.WriteString("\r\n")
}

// binary returns n bytes that do not compress, like the images and
// archives attachments carry.
func (g *generator) binary(n int) []byte {
	raw := make([]byte, n)
	for i := 0; i < n; i += 8 {
		v := g.rng.Uint64()
		for j := 0; j < 8 && i+j < n; j++ {
			raw[i+j] = byte(v >> (8 * j))
		}
	}
	return raw
}

func (g *generator) html(text string, extra string) string {
	var b strings.Builder
	b.WriteString("<!DOCTYPE html>\n<html><head><style>p{font-family:Arial,sans-serif;font-size:14px;color:#222}</style></head>\n<body>\n")
	for _, para := range strings.Split(strings.TrimSpace(text), "\n\n") {
		b.WriteString("<p>" + strings.ReplaceAll(para, "\n", " ") + "</p>\n")
	}
	b.WriteString(extra)
	b.WriteString("</body></html>\n")
	return b.String()
}

func (g *generator) boundary(depth int) string {
	return fmt.Sprintf("=_mf%d_%d_%x", depth, g.n, g.rng.Uint32())
}

// message writes one message of kind k; depth > 0 is a message nested in
// another, which never nests further.
func (g *generator) message(b *bytes.Buffer, k Kind, depth int) {
	subject := g.subject()
	switch k {
	case Plain:
		g.headers(b, subject)
		g.textPart(b, "plain", g.ending(g.prose(g.logNormal(2000, 0.8, 300, 40_000))))
	case Alternative:
		g.headers(b, subject)
		text := g.ending(g.prose(g.logNormal(2000, 0.8, 300, 30_000)))
		pad := strings.Repeat("<div style=\"margin:0;padding:0\"><span style=\"font-size:11pt\"></span></div>\n", g.logNormal(60, 0.9, 5, 1500))
		g.alternative(b, depth, text, g.html(text, pad))
	case Newsletter:
		g.headers(b, "Newsletter: "+subject, "List-Unsubscribe: <https://news.example.test/u/"+fmt.Sprint(g.n)+">", "Precedence: bulk")
		text := g.prose(g.logNormal(5000, 0.5, 1000, 30_000))
		var blocks strings.Builder
		for i := range g.logNormal(25, 0.5, 5, 120) {
			fmt.Fprintf(&blocks, "<table width=\"600\" cellpadding=\"0\" cellspacing=\"0\" border=\"0\" style=\"border-collapse:collapse\"><tr><td style=\"padding:12px 24px;font-family:Helvetica,Arial,sans-serif\"><a href=\"https://news.example.test/click?id=%d&amp;u=%d\"><img src=\"https://cdn.example.test/i/%d.png\" width=\"552\" alt=\"\"></a></td></tr></table>\n", i, g.n, i)
		}
		g.alternative(b, depth, text, g.html(text, blocks.String()))
	case MailingList:
		g.headers(b, "[dev] "+subject, "List-Id: <dev.lists.example.test>", "List-Post: <mailto:dev@lists.example.test>", "Precedence: list")
		g.textPart(b, "plain", g.ending(g.prose(g.logNormal(2000, 0.8, 300, 30_000)))+"\n_______________________________________________\ndev mailing list\nhttps://lists.example.test/dev\n")
	case Attachment:
		g.headers(b, subject)
		bd := g.boundary(depth)
		fmt.Fprintf(b, "Content-Type: multipart/mixed; boundary=%q\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\n", bd)
		g.textPart(b, "plain", g.ending(g.prose(g.logNormal(800, 0.7, 100, 8000))))
		// One to three attachments whose total is drawn from the tail:
		// median about 190 KB, p99 of the whole corpus about 1.2 MB.
		total := g.logNormal(170_000, 1.3, 8_000, 6_000_000) * 3 / 4
		parts := 1 + g.rng.IntN(3)
		types := []string{"application/pdf", "image/jpeg", "application/vnd.openxmlformats-officedocument.wordprocessingml.document", "application/zip", "image/png"}
		exts := []string{"pdf", "jpg", "docx", "zip", "png"}
		for i := range parts {
			t := g.rng.IntN(len(types))
			name := fmt.Sprintf("document-%d-%d.%s", g.n, i, exts[t])
			if g.lang.name != "en" && i == 0 {
				name = mime.BEncoding.Encode("utf-8", g.lang.words[0]+"-"+fmt.Sprint(g.n)+"."+exts[t])
			}
			fmt.Fprintf(b, "--%s\r\nContent-Type: %s; name=\"%s\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"%s\"\r\n\r\n", bd, types[t], name, name)
			writeBase64(b, g.binary(total/parts))
		}
		fmt.Fprintf(b, "--%s--\r\n", bd)
	case Related:
		g.headers(b, subject)
		bd := g.boundary(depth)
		fmt.Fprintf(b, "Content-Type: multipart/related; boundary=%q; type=\"text/html\"\r\n\r\n", bd)
		images := 1 + g.rng.IntN(3)
		var tags strings.Builder
		for i := range images {
			fmt.Fprintf(&tags, "<img src=\"cid:img%d.%d@example.test\" alt=\"\">\n", i, g.n)
		}
		fmt.Fprintf(b, "--%s\r\n", bd)
		g.textPart(b, "html", g.html(g.ending(g.prose(g.logNormal(1500, 0.7, 200, 10_000))), tags.String()))
		for i := range images {
			fmt.Fprintf(b, "--%s\r\nContent-Type: image/png\r\nContent-Transfer-Encoding: base64\r\nContent-ID: <img%d.%d@example.test>\r\nContent-Disposition: inline\r\n\r\n", bd, i, g.n)
			writeBase64(b, g.binary(g.logNormal(12_000, 0.8, 800, 200_000)))
		}
		fmt.Fprintf(b, "--%s--\r\n", bd)
	case Forwarded:
		g.headers(b, "Fwd: "+subject)
		bd := g.boundary(depth)
		fmt.Fprintf(b, "Content-Type: multipart/mixed; boundary=%q\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\n", bd)
		g.textPart(b, "plain", g.prose(g.logNormal(400, 0.6, 50, 3000)))
		fmt.Fprintf(b, "--%s\r\nContent-Type: message/rfc822\r\nContent-Disposition: inline\r\n\r\n", bd)
		inner := []Kind{Plain, Alternative, Alternative, Attachment}[g.rng.IntN(4)]
		if depth > 0 {
			inner = Plain
		}
		g.message(b, inner, depth+1)
		fmt.Fprintf(b, "\r\n--%s--\r\n", bd)
	case InlineForward:
		g.headers(b, "Fwd: "+subject)
		fwd := g.person(3)
		g.textPart(b, "plain", g.prose(g.logNormal(300, 0.6, 50, 2000))+"\n---------- Forwarded message ---------\nFrom: "+fwd.name+" <"+fwd.addr+">\nDate: "+
			g.date(-72*time.Hour).Format(time.RFC1123Z)+"\nSubject: "+subject+"\n\n"+g.prose(g.logNormal(3000, 0.7, 300, 20_000)))
	case SMIMESigned, PGPSigned:
		g.headers(b, subject)
		bd := g.boundary(depth)
		if k == SMIMESigned {
			fmt.Fprintf(b, "Content-Type: multipart/signed; protocol=\"application/pkcs7-signature\"; micalg=sha-256; boundary=%q\r\n\r\n", bd)
		} else {
			fmt.Fprintf(b, "Content-Type: multipart/signed; protocol=\"application/pgp-signature\"; micalg=pgp-sha256; boundary=%q\r\n\r\n", bd)
		}
		fmt.Fprintf(b, "--%s\r\n", bd)
		g.textPart(b, "plain", g.ending(g.prose(g.logNormal(2000, 0.8, 200, 20_000))))
		if k == SMIMESigned {
			fmt.Fprintf(b, "--%s\r\nContent-Type: application/pkcs7-signature; name=\"smime.p7s\"\r\nContent-Transfer-Encoding: base64\r\nContent-Disposition: attachment; filename=\"smime.p7s\"\r\n\r\n", bd)
			writeBase64(b, g.binary(3000+g.rng.IntN(3000)))
		} else {
			fmt.Fprintf(b, "--%s\r\nContent-Type: application/pgp-signature; name=\"signature.asc\"\r\nContent-Disposition: attachment; filename=\"signature.asc\"\r\n\r\n-----BEGIN PGP SIGNATURE-----\r\n\r\n", bd)
			writeBase64(b, g.binary(566))
			b.WriteString("-----END PGP SIGNATURE-----\r\n")
		}
		fmt.Fprintf(b, "--%s--\r\n", bd)
	case PGPEncrypted:
		g.headers(b, "...")
		bd := g.boundary(depth)
		fmt.Fprintf(b, "Content-Type: multipart/encrypted; protocol=\"application/pgp-encrypted\"; boundary=%q\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\nContent-Type: application/pgp-encrypted\r\nContent-Description: PGP/MIME version identification\r\n\r\nVersion: 1\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\nContent-Type: application/octet-stream; name=\"encrypted.asc\"\r\nContent-Disposition: inline; filename=\"encrypted.asc\"\r\n\r\n-----BEGIN PGP MESSAGE-----\r\n\r\n", bd)
		writeBase64(b, g.binary(g.logNormal(5000, 0.9, 600, 400_000)))
		fmt.Fprintf(b, "-----END PGP MESSAGE-----\r\n--%s--\r\n", bd)
	case Calendar:
		g.headers(b, "Invitation: "+subject)
		bd := g.boundary(depth)
		start := g.date(72 * time.Hour)
		fmt.Fprintf(b, "Content-Type: multipart/alternative; boundary=%q\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\n", bd)
		g.textPart(b, "plain", g.prose(g.logNormal(600, 0.5, 100, 3000)))
		fmt.Fprintf(b, "--%s\r\nContent-Type: text/calendar; charset=\"utf-8\"; method=REQUEST\r\n\r\n", bd)
		fmt.Fprintf(b, "BEGIN:VCALENDAR\r\nVERSION:2.0\r\nPRODID:-//Example//Calendar//EN\r\nMETHOD:REQUEST\r\nBEGIN:VEVENT\r\nUID:%d-%d@example.test\r\nDTSTART:%s\r\nDTEND:%s\r\nSUMMARY:%s\r\nORGANIZER:mailto:%s\r\nATTENDEE;RSVP=TRUE:mailto:%s\r\nEND:VEVENT\r\nEND:VCALENDAR\r\n",
			g.seed, g.n, start.Format("20060102T150405Z"), start.Add(time.Hour).Format("20060102T150405Z"), "Meeting", g.person(0).addr, g.person(5).addr)
		fmt.Fprintf(b, "--%s--\r\n", bd)
	case Bounce:
		fmt.Fprintf(b, "From: Mail Delivery System <MAILER-DAEMON@example.test>\r\nTo: %s\r\nSubject: Undelivered Mail Returned to Sender\r\nDate: %s\r\nMessage-ID: <bounce.%d.%d@example.test>\r\nAuto-Submitted: auto-replied\r\nMIME-Version: 1.0\r\n",
			g.person(0).addr, g.date(0).Format(time.RFC1123Z), g.seed, g.n)
		bd := g.boundary(depth)
		fmt.Fprintf(b, "Content-Type: multipart/report; report-type=delivery-status; boundary=%q\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\nContent-Type: text/plain; charset=us-ascii\r\n\r\nThis is the mail system at host mail.example.test.\r\n\r\nI'm sorry to have to inform you that your message could not\r\nbe delivered to one or more recipients.\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\nContent-Type: message/delivery-status\r\n\r\nReporting-MTA: dns; mail.example.test\r\n\r\nFinal-Recipient: rfc822; nobody@example.test\r\nAction: failed\r\nStatus: 5.1.1\r\nDiagnostic-Code: smtp; 550 5.1.1 User unknown\r\n\r\n", bd)
		fmt.Fprintf(b, "--%s\r\nContent-Type: text/rfc822-headers\r\n\r\nFrom: %s\r\nTo: nobody@example.test\r\nSubject: %s\r\n\r\n--%s--\r\n", bd, g.person(0).addr, g.header(subject), bd)
	}
}

func (g *generator) alternative(b *bytes.Buffer, depth int, text, html string) {
	bd := g.boundary(depth)
	fmt.Fprintf(b, "Content-Type: multipart/alternative; boundary=%q\r\n\r\n", bd)
	fmt.Fprintf(b, "--%s\r\n", bd)
	g.textPart(b, "plain", text)
	fmt.Fprintf(b, "--%s\r\n", bd)
	g.textPart(b, "html", html)
	fmt.Fprintf(b, "--%s--\r\n", bd)
}
