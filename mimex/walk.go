package mimex

import (
	"bufio"
	"bytes"
	"encoding/base64"
	"io"
	"mime/quotedprintable"
	"strings"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // charset tables for message.CharsetReader
	"github.com/emersion/go-message/textproto"
)

// position is where a part sits with respect to the attachment rules.
type position uint8

const (
	posBody  position = iota // in the resolved body branch (rule 3)
	posOther                 // outside it: rules 2, 4, 5
	posSkip                  // a detached signature: not classified at all (rule 1)
)

// candidate is a part that is an inline resource when an HTML body part
// references it (rule 4) and an attachment otherwise (rule 5). It keeps no
// payload.
type candidate struct {
	mediaType   string
	disposition string
	contentID   string
	rawName     string
	size        int64
	tnef        bool
}

type failure struct{ f Failure }

func (e *failure) Error() string { return string(e.f) }

// walker is one forward-only pass over the message. It reports the
// structure as it reads it and keeps per-part records only (no payload, no
// tree), so abandoning at a limit leaves nothing beyond the limit built.
type walker struct {
	lim Limits

	// relatedFallback names (by part number) the multipart/related
	// containers whose start parameter matched no child: on a second pass
	// their first child is the body. unmatchedRelated collects them.
	relatedFallback  map[int]bool
	unmatchedRelated []int

	parts int
	buf   []byte        // the one copy buffer every measured part streams through
	hbuf  *bufio.Reader // reused between HTML body parts

	cands []candidate
	refs  refSet

	plain, html             textAcc
	plainFound, htmlFound   bool
	htmlScanFailed          bool
	bodyEncrypted           bool
	encrypted, signed, tnef bool
}

func extract(raw []byte, lim Limits) Result {
	lim = lim.withDefaults()
	if len(bytes.TrimSpace(raw)) == 0 {
		return unreadable(Unparseable)
	}
	w := &walker{lim: lim}
	h, f := w.pass(raw)
	if f == FailureNone && len(w.unmatchedRelated) > 0 {
		fb := make(map[int]bool, len(w.unmatchedRelated))
		for _, n := range w.unmatchedRelated {
			fb[n] = true
		}
		w = &walker{lim: lim, relatedFallback: fb, buf: w.buf}
		h, f = w.pass(raw)
	}
	if f != FailureNone {
		return unreadable(f)
	}
	return w.result(h)
}

// pass reads the message once.
func (w *walker) pass(raw []byte) (textproto.Header, Failure) {
	br := bufio.NewReaderSize(bytes.NewReader(raw), 4096)
	h, err := textproto.ReadHeader(br)
	if err != nil {
		return h, Unparseable
	}
	if w.buf == nil {
		w.buf = make([]byte, 8*1024)
	}
	w.plain = newTextAcc(w.lim.MaxExtractedTextCharacters)
	w.html = newTextAcc(w.lim.MaxExtractedTextCharacters)
	w.parts = 1
	if err := w.entity(h, br, 0, posBody, "text/plain", 1); err != nil {
		if fe, ok := err.(*failure); ok {
			return h, fe.f
		}
		return h, Unparseable
	}
	return h, FailureNone
}

func contentType(h *textproto.Header, def string) headerParams {
	v := h.Get("Content-Type")
	if strings.TrimSpace(v) == "" {
		return headerParams{value: def}
	}
	ct := parseHeaderParams(v)
	typ, sub, ok := strings.Cut(ct.value, "/")
	if !ok || !isToken(typ) || !isToken(sub) {
		// RFC 2045 5.2: a syntactically invalid Content-Type is text/plain.
		return headerParams{value: "text/plain"}
	}
	return ct
}

func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7F || strings.IndexByte(`()<>@,;:\"/[]?=`, c) >= 0 {
			return false
		}
	}
	return true
}

// normalizeID strips the angle brackets and white space around a
// Content-ID or a start parameter.
func normalizeID(v string) string {
	v = strings.TrimFunc(v, isIDSpace)
	v = strings.TrimPrefix(v, "<")
	v = strings.TrimSuffix(v, ">")
	return strings.TrimFunc(v, isIDSpace)
}

// entity classifies and reads one part (the message itself first).
func (w *walker) entity(h textproto.Header, body io.Reader, depth int, pos position, defType string, num int) error {
	ct := contentType(&h, defType)
	if strings.HasPrefix(ct.value, "multipart/") {
		return w.multipart(ct, body, depth, pos, num)
	}
	return w.leaf(h, ct, body, pos)
}

type multipartKind uint8

const (
	kindMixed multipartKind = iota
	kindAlternative
	kindRelated
	kindSigned
)

func (w *walker) multipart(ct headerParams, body io.Reader, depth int, pos position, num int) error {
	boundary := ct.param("boundary")
	if boundary == "" {
		return &failure{Unparseable}
	}
	sub := strings.TrimPrefix(ct.value, "multipart/")
	protocol := strings.TrimSpace(ct.param("protocol"))
	kind := kindMixed
	switch {
	case sub == "encrypted" && protocol != "":
		// Rule 1: recognized only with its RFC 1847 protocol parameter. The
		// message is encrypted; no child is classified, so none is opened.
		w.encrypted = true
		if pos == posBody {
			w.bodyEncrypted = true
		}
		return nil
	case sub == "signed" && protocol != "":
		w.signed = true
		kind = kindSigned
	case sub == "alternative":
		kind = kindAlternative
	case sub == "related":
		kind = kindRelated
	}
	// Any other subtype (mixed, digest, report, parallel, a bare encrypted
	// or signed without protocol, an unknown one) is read as mixed, as
	// RFC 2046 says an unrecognized multipart subtype is.
	childDefault := "text/plain"
	if sub == "digest" {
		childDefault = "message/rfc822"
	}
	start := ""
	if kind == kindRelated {
		start = normalizeID(ct.param("start"))
	}
	matched := false

	mr := textproto.NewMultipartReader(body, boundary)
	for i := 0; ; i++ {
		p, err := mr.NextPart()
		if err == io.EOF {
			break
		}
		if err != nil {
			if strings.HasSuffix(err.Error(), "EOF") {
				// The input ended before the closing delimiter: a truncated
				// message. What was read stands.
				break
			}
			return &failure{Unparseable}
		}
		w.parts++
		if w.parts > w.lim.MaxPartCount {
			return &failure{PartCountExceeded}
		}
		if depth+1 > w.lim.MaxNestingDepth {
			return &failure{NestingDepthExceeded}
		}
		childNum := w.parts

		childPos := posOther
		switch kind {
		case kindSigned:
			switch i {
			case 0:
				childPos = pos
			case 1:
				childPos = posSkip
			}
		case kindAlternative:
			childPos = pos
		case kindRelated:
			if start != "" {
				if !matched && normalizeID(p.Header.Get("Content-Id")) == start {
					matched = true
					childPos = pos
				} else if i == 0 && w.relatedFallback[num] {
					childPos = pos
				}
			} else if i == 0 {
				childPos = pos
			}
		default:
			if i == 0 {
				childPos = pos
			}
		}
		if pos == posOther && childPos == posBody {
			childPos = posOther
		}
		if childPos == posSkip {
			continue // the detached signature: counted, never classified
		}
		if err := w.entity(p.Header, p, depth+1, childPos, childDefault, childNum); err != nil {
			return err
		}
	}
	if kind == kindRelated && start != "" && !matched {
		w.unmatchedRelated = append(w.unmatchedRelated, num)
	}
	return nil
}

// Cryptographic leaf media types (rule 2).
func cryptoLeaf(mt string) bool {
	switch mt {
	case "application/pkcs7-signature", "application/x-pkcs7-signature",
		"application/pgp-signature",
		"application/pkcs7-mime", "application/x-pkcs7-mime",
		"application/pgp-encrypted":
		return true
	}
	return false
}

func isTNEF(mt, name string) bool {
	if mt == "application/ms-tnef" || mt == "application/vnd.ms-tnef" {
		return true
	}
	return strings.EqualFold(name, "winmail.dat")
}

func (w *walker) leaf(h textproto.Header, ct headerParams, body io.Reader, pos position) error {
	mt := ct.value
	if pos == posSkip {
		return nil
	}
	if cryptoLeaf(mt) {
		// Rule 2: never an attachment, whatever its disposition says.
		switch mt {
		case "application/pkcs7-signature", "application/x-pkcs7-signature", "application/pgp-signature":
			w.signed = true
		case "application/pgp-encrypted":
			w.encrypted = true
			if pos == posBody {
				w.bodyEncrypted = true
			}
		default: // opaque S/MIME
			switch strings.ToLower(strings.TrimSpace(ct.param("smime-type"))) {
			case "enveloped-data", "authenveloped-data":
				w.encrypted = true
			case "signed-data":
				w.signed = true
			}
			if pos == posBody {
				// The body itself is sealed inside the CMS structure.
				w.bodyEncrypted = true
			}
		}
		return nil
	}

	cte := strings.ToLower(strings.TrimSpace(h.Get("Content-Transfer-Encoding")))
	disp := parseHeaderParams(h.Get("Content-Disposition"))
	rawName := disp.param("filename")
	if rawName == "" {
		rawName = ct.param("name")
	}
	saneName, _, _ := SanitizeFileName(rawName)
	tnef := isTNEF(mt, saneName)
	if tnef {
		w.tnef = true
	}

	if pos == posBody {
		switch mt {
		case "text/plain":
			if !w.plainFound {
				w.readPlain(decodeTransfer(cte, body), ct.param("charset"))
			}
		case "text/html":
			w.readHTML(decodeTransfer(cte, body), ct.param("charset"))
		}
		return nil
	}

	var size int64
	if cte == "base64" {
		size = w.measureBase64(body)
	} else {
		size = w.measure(decodeTransfer(cte, body))
	}
	w.cands = append(w.cands, candidate{
		mediaType:   mt,
		disposition: disp.value,
		contentID:   normalizeID(h.Get("Content-Id")),
		rawName:     rawName,
		size:        size,
		tnef:        tnef,
	})
	return nil
}

// counter is an io.Writer that counts and keeps nothing. Its ReadFrom
// streams through the walker's one buffer, so measuring a part allocates
// nothing.
type counter struct {
	n   int64
	buf []byte
}

func (c *counter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

func (c *counter) ReadFrom(r io.Reader) (int64, error) {
	var total int64
	for empty := 0; empty < 100; {
		n, err := r.Read(c.buf)
		total += int64(n)
		c.n += int64(n)
		if err == io.EOF {
			return total, nil
		}
		if err != nil {
			return total, err
		}
		if n == 0 {
			empty++
		}
	}
	return total, io.ErrNoProgress
}

// measure returns the decoded octet count of a part. A transfer-encoding
// error ends the measurement: what decoded is what is counted.
func (w *walker) measure(r io.Reader) int64 {
	c := &counter{buf: w.buf}
	_, _ = io.Copy(c, r)
	return c.n
}

// measureBase64 counts the octets a base64 body decodes to without decoding
// it: the body streams through once, every four characters of the alphabet
// carry three octets, characters outside the alphabet are skipped as the
// decoder skips them, and padding ends the data. For a well-formed body the
// count equals what decoding would produce; decoding attachments only to
// count them was a fifth of the extraction's CPU.
func (w *walker) measureBase64(r io.Reader) int64 {
	var chars int64
	for {
		n, err := r.Read(w.buf)
		for _, c := range w.buf[:n] {
			if c == '=' {
				return chars * 6 / 8
			}
			chars += int64(base64Alphabet[c])
		}
		if err != nil {
			return chars * 6 / 8
		}
	}
}

// decodeTransfer undoes the Content-Transfer-Encoding. An unknown encoding
// is measured as it arrived.
func decodeTransfer(cte string, r io.Reader) io.Reader {
	switch cte {
	case "base64":
		return base64.NewDecoder(base64.StdEncoding, &base64Filter{r: r})
	case "quoted-printable":
		return quotedprintable.NewReader(r)
	}
	return r
}

// base64Alphabet is 1 for the bytes a base64 body consists of.
var base64Alphabet = func() (t [256]uint8) {
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/=") {
		t[c] = 1
	}
	return t
}()

// base64Filter drops every byte outside the base64 alphabet (line breaks,
// the white space some encoders indent with, stray junk), as lenient MIME
// readers do.
type base64Filter struct{ r io.Reader }

func (f *base64Filter) Read(p []byte) (int, error) {
	for {
		n, err := f.r.Read(p)
		j := 0
		for _, c := range p[:n] {
			p[j] = c
			j += int(base64Alphabet[c])
		}
		if j > 0 || err != nil {
			return j, err
		}
	}
}

// charsetDecode converts a text part to UTF-8. UTF-8 and US-ASCII pass
// through; an unknown charset leaves the bytes for textAcc, which reads
// invalid UTF-8 as ISO-8859-1.
func charsetDecode(charset string, r io.Reader) io.Reader {
	charset = strings.ToLower(strings.TrimSpace(charset))
	if i := strings.IndexAny(charset, " \t("); i >= 0 {
		charset = charset[:i]
	}
	switch charset {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return r
	}
	if message.CharsetReader == nil {
		return r
	}
	cr, err := message.CharsetReader(charset, r)
	if err != nil || cr == nil {
		return r
	}
	return cr
}

// readPlain accumulates a text/plain body part up to the text bound; the
// part is read no further once the bound is reached. The first text/plain
// body part with words in it is the plain text.
func (w *walker) readPlain(r io.Reader, charset string) {
	r = charsetDecode(charset, r)
	w.plain.reset()
	for empty := 0; !w.plain.full && empty < 100; {
		n, err := r.Read(w.buf)
		w.plain.writeBytes(w.buf[:n])
		if err != nil {
			break
		}
		if n == 0 {
			empty++ // a reader that makes no progress ends the part
		}
	}
	w.plain.flush()
	if w.plain.hasWords() {
		w.plainFound = true
	} else {
		w.plain.reset()
	}
}

// readHTML scans an HTML body part for cid: references, and derives its text
// while no plain text and no earlier HTML text has been found.
func (w *walker) readHTML(r io.Reader, charset string) {
	// The tokenizer asks for a few bytes at a time; a buffer between it and
	// the decoders keeps them working on whole blocks.
	if w.hbuf == nil {
		w.hbuf = bufio.NewReaderSize(charsetDecode(charset, r), 8<<10)
	} else {
		w.hbuf.Reset(charsetDecode(charset, r))
	}
	r = w.hbuf
	var acc *textAcc
	if !w.plainFound && !w.htmlFound {
		w.html.reset()
		acc = &w.html
	}
	if !scanHTML(r, &w.refs, acc) {
		w.htmlScanFailed = true
	}
	if acc != nil {
		if w.html.hasWords() {
			w.htmlFound = true
		} else {
			w.html.reset()
		}
	}
}

// result assembles the Result of a completed pass.
func (w *walker) result(h textproto.Header) Result {
	res := Result{Readable: true}
	readHeaderFields(&h, &res)

	sum := Summary{Encrypted: w.encrypted, UnverifiedSignature: w.signed, TNEF: w.tnef}
	for _, c := range w.cands {
		inlineOK := c.disposition == "" || c.disposition == "inline"
		if c.contentID != "" && inlineOK && w.refs.has(c.contentID) {
			sum.InlineResourceCount++
			continue
		}
		if c.contentID != "" && inlineOK && (w.htmlScanFailed || w.refs.failed) {
			// Whether this part is an inline resource depends on the part of
			// the HTML the bounded scan could not read.
			return unreadable(ReferenceScanFailed)
		}
		name, repaired, unnamed := SanitizeFileName(c.rawName)
		sum.Items = append(sum.Items, Attachment{
			FileName:         name,
			FileNameRepaired: repaired,
			Unnamed:          unnamed,
			MediaType:        c.mediaType,
			Disposition:      c.disposition,
			DecodedSize:      c.size,
			TNEFUnexpanded:   c.tnef,
			Calendar:         c.mediaType == "text/calendar",
			NestedMessage:    c.mediaType == "message/rfc822" || c.mediaType == "message/global",
		})
		sum.TotalDecodedSize += c.size
	}
	sum.Count = len(sum.Items)
	res.Attachments = sum

	var acc *textAcc
	switch {
	case w.plainFound:
		acc = &w.plain
	case w.htmlFound:
		acc = &w.html
		res.Body.Lossy = true
	}
	if acc == nil {
		if w.bodyEncrypted {
			res.Body.State = BodyEncrypted
		} else {
			res.Body.State = BodyNoTextualBody
		}
		return res
	}
	text, truncated := acc.finish()
	if res.Body.Lossy && w.htmlScanFailed {
		truncated = true // the tokenizer stopped before the end of the part
	}
	if text == "" {
		// Only possible when the first text element alone is longer than
		// the bound: there were words, and none of them fit.
		res.Body.State = BodyNoTextualBody
		res.Body.Lossy = false
		res.Body.Truncated = true
		return res
	}
	res.Body.State = BodyText
	res.Body.Untrimmed = text
	res.Body.Truncated = truncated
	res.Body.Text = trimQuoted(text, truncated)
	return res
}
