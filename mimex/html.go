package mimex

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"unicode/utf8"

	"golang.org/x/net/html"
)

const (
	// MaxReferenceScanTokenBytes bounds the reference scan of an HTML body
	// part: the tokenizer buffers one token at a time (a tag with its
	// attributes, a run of text, a style sheet), and a token larger than this
	// defeats the scan. Inline data: URIs of a few megabytes still fit.
	MaxReferenceScanTokenBytes = 8 << 20

	// MaxReferenceCount bounds the distinct cid: references one message's
	// HTML body parts may make; more defeat the scan.
	MaxReferenceCount = 10000
)

// refSet holds the Content-IDs referenced by HTML body parts, percent-decoded.
type refSet struct {
	m      map[string]struct{}
	failed bool
}

func (s *refSet) add(url []byte) {
	id := strings.TrimFunc(percentDecode(string(url)), isIDSpace)
	if id == "" {
		return
	}
	if s.m == nil {
		s.m = make(map[string]struct{})
	}
	if _, ok := s.m[id]; ok {
		return
	}
	if len(s.m) >= MaxReferenceCount {
		s.failed = true
		return
	}
	s.m[id] = struct{}{}
}

func (s *refSet) has(id string) bool {
	_, ok := s.m[id]
	return ok
}

// addCIDURL records url when it is a cid: URL.
func (s *refSet) addCIDURL(url []byte) {
	url = bytes.TrimFunc(url, isIDSpace)
	if len(url) >= 4 && bytes.EqualFold(url[:4], []byte("cid:")) {
		s.add(url[4:])
	}
}

// scanCSS records the cid: URLs a style sheet references: the arguments of
// url() and quoted strings (@import "cid:…", image-set("cid:…" 1x)).
// Comments are skipped, since no renderer follows a URL inside one.
func (s *refSet) scanCSS(css []byte) {
	for i := 0; i < len(css); i++ {
		c := css[i]
		switch {
		case c == '/' && i+1 < len(css) && css[i+1] == '*':
			end := bytes.Index(css[i+2:], []byte("*/"))
			if end < 0 {
				return
			}
			i += 2 + end + 1
		case c == '"' || c == '\'':
			str, n := cssString(css[i:])
			s.addCIDURL(str)
			i += n - 1
		case (c == 'u' || c == 'U') && i+4 <= len(css) && bytes.EqualFold(css[i:i+4], []byte("url(")):
			j := i + 4
			for j < len(css) && isCSSSpace(css[j]) {
				j++
			}
			if j < len(css) && (css[j] == '"' || css[j] == '\'') {
				str, n := cssString(css[j:])
				s.addCIDURL(str)
				i = j + n - 1
				continue
			}
			end := bytes.IndexByte(css[j:], ')')
			if end < 0 {
				end = len(css) - j
			}
			s.addCIDURL(css[j : j+end])
			i = j + end
		}
	}
}

// cssString returns the content of the quoted string css starts with and the
// number of bytes it spans.
func cssString(css []byte) ([]byte, int) {
	q := css[0]
	for i := 1; i < len(css); i++ {
		switch css[i] {
		case '\\':
			i++
		case q, '\n':
			return css[1:i], i + 1
		}
	}
	return css[1:], len(css)
}

func isCSSSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }

// scanAttr records a reference an attribute value makes: a value that is a
// cid: URL, the candidates of a srcset, the URLs of an inline style.
func (s *refSet) scanAttr(key, val []byte) {
	s.addCIDURL(val)
	switch string(key) {
	case "style":
		s.scanCSS(val)
	case "srcset":
		for _, cand := range bytes.Split(val, []byte(",")) {
			if f := bytes.Fields(cand); len(f) > 0 {
				s.addCIDURL(f[0])
			}
		}
	}
}

// htmlText derives text from HTML the way a reader saw it: script, style and
// head content dropped, block elements turned into line breaks, character
// references decoded, runs of source white space collapsed. Blockquoted
// content is prefixed with "> " per level, the plain-text convention for
// quoted history, so the trimming rules see an HTML reply's quote as what it
// is. Nothing is fetched: the tokenizer only reads the bytes it is given.
type htmlText struct {
	acc        *textAcc
	pendingNL  int
	pendSpace  bool
	lineStart  bool
	wroteAny   bool
	quote      int
	pre        int
	lineRunes  int
	lineDashes int
}

func (t *htmlText) breakLine(n int) {
	if n > t.pendingNL {
		t.pendingNL = n
	}
}

func (t *htmlText) lineBreakTag() {
	if t.pendingNL < 2 {
		t.pendingNL++
	}
}

func (t *htmlText) flush() {
	if t.pendingNL > 0 {
		if t.wroteAny {
			// Keep the RFC 3676 signature separator "-- " whole: collapsing
			// would otherwise eat its trailing space.
			if t.pendSpace && t.lineRunes == 2 && t.lineDashes == 2 {
				t.acc.writeRune(' ')
			}
			for i := 0; i < t.pendingNL; i++ {
				t.acc.writeRune('\n')
				if i+1 < t.pendingNL && t.quote > 0 {
					t.acc.writeString(strings.Repeat(">", t.quote))
				}
			}
			t.lineStart = true
			t.lineRunes, t.lineDashes = 0, 0
		}
		t.pendingNL = 0
		t.pendSpace = false
	}
	if !t.wroteAny {
		t.lineStart = true
	}
	if t.lineStart {
		if t.quote > 0 {
			t.acc.writeString(strings.Repeat(">", t.quote))
			t.acc.writeRune(' ')
		}
		t.lineStart = false
		t.pendSpace = false
	}
	if t.pendSpace {
		t.acc.writeRune(' ')
		t.lineRunes++
		t.pendSpace = false
	}
}

func (t *htmlText) text(b []byte) {
	for len(b) > 0 && !t.acc.full {
		r, size := utf8.DecodeRune(b)
		if r == utf8.RuneError && size == 1 {
			r = rune(b[0])
		}
		b = b[size:]
		if t.pre > 0 {
			if r == '\n' {
				t.lineBreakTag()
				continue
			}
		} else if r == ' ' || r == '\t' || r == '\n' || r == '\r' || r == '\f' || r == 0xA0 {
			t.pendSpace = true
			continue
		}
		t.flush()
		t.acc.writeRune(r)
		t.wroteAny = true
		t.lineRunes++
		if r == '-' {
			t.lineDashes++
		}
	}
}

// lowerTagName returns the lower-cased name of the tag whose raw text is
// raw ("<Name …>", "</name>"), in buf when it fits. Names longer than buf are
// of no element this package treats specially and come back truncated.
func lowerTagName(raw, buf []byte) []byte {
	i := 1
	if i < len(raw) && raw[i] == '/' {
		i++
	}
	for ; i < len(raw); i++ {
		c := raw[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '/' || c == '>' {
			break
		}
		if len(buf) == cap(buf) {
			return append(buf, '?') // longer than any special name
		}
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		buf = append(buf, c)
	}
	return buf
}

// rawSkipped lists the elements whose content the tokenizer reads as raw
// text and a reader never sees as words.
func rawSkipped(name []byte) bool {
	switch string(name) {
	case "script", "style", "noscript", "iframe", "noembed", "noframes", "title":
		return true
	}
	return false
}

// headElement lists the elements a head may hold.
func headElement(name []byte) bool {
	switch string(name) {
	case "title", "meta", "link", "style", "script", "base", "noscript", "template":
		return true
	}
	return false
}

func blockBreak(name []byte) int {
	switch string(name) {
	case "p", "h1", "h2", "h3", "h4", "h5", "h6", "table", "ul", "ol", "dl", "hr":
		return 2
	case "div", "li", "tr", "dt", "dd", "address", "article", "aside", "center",
		"details", "summary", "fieldset", "figure", "figcaption", "footer", "form",
		"header", "main", "nav", "section", "caption", "tbody", "thead", "tfoot", "body", "html":
		return 1
	}
	return 0
}

// scanHTML tokenizes one decoded HTML body part, recording its cid:
// references in refs and, when acc is not nil, deriving its text into acc
// until acc reaches its bound; past the bound the tokenizer keeps going for
// references only, because the attachment summary must not depend on how
// long the text is. It reports false when the part defeats the bounded scan.
func scanHTML(r io.Reader, refs *refSet, acc *textAcc) bool {
	z := html.NewTokenizer(r)
	z.SetMaxBuf(MaxReferenceScanTokenBytes)
	t := htmlText{acc: acc}
	inHead := false
	raw := ""
	var nameBuf [16]byte
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			err := z.Err()
			if errors.Is(err, html.ErrBufferExceeded) {
				return false
			}
			return !refs.failed // io.EOF, or a decoding error ending the part early
		case html.TextToken:
			if raw != "" {
				if raw == "style" {
					refs.scanCSS(z.Text())
				}
				continue
			}
			if acc == nil || acc.full {
				continue
			}
			text := z.Text()
			if inHead {
				// Words end the head, as they do in a browser.
				if len(bytes.TrimSpace(text)) == 0 {
					continue
				}
				inHead = false
			}
			t.text(text)
		case html.StartTagToken, html.SelfClosingTagToken:
			rawTag := z.Raw()
			name := lowerTagName(rawTag, nameBuf[:0])
			// Every cid: URL holds a colon, literally or as a character
			// reference; a tag with neither cannot make a reference, and
			// skipping its attributes keeps the scan from allocating per tag.
			if bytes.IndexByte(rawTag, ':') >= 0 || bytes.IndexByte(rawTag, '&') >= 0 {
				for more := true; more; {
					var key, val []byte
					key, val, more = z.TagAttr()
					if key == nil {
						break
					}
					refs.scanAttr(key, val)
				}
				if refs.failed {
					return false
				}
			}
			switch {
			case string(name) == "head":
				inHead = tt == html.StartTagToken
			case inHead && !headElement(name):
				// An element that cannot be in a head ends it, as in a
				// browser; a missing </head> does not hide the body.
				inHead = false
			}
			if rawSkipped(name) {
				raw = string(name)
			}
			if acc == nil || inHead {
				continue
			}
			switch string(name) {
			case "br":
				t.lineBreakTag()
			case "blockquote":
				t.breakLine(1)
				t.quote++
			case "pre", "textarea", "xmp", "plaintext":
				t.breakLine(1)
				t.pre++
			case "td", "th":
				t.pendSpace = true
			default:
				t.breakLine(blockBreak(name))
			}
		case html.EndTagToken:
			name := lowerTagName(z.Raw(), nameBuf[:0])
			if raw != "" && string(name) == raw {
				raw = ""
				continue
			}
			if string(name) == "head" {
				inHead = false
				continue
			}
			if acc == nil || inHead {
				continue
			}
			switch string(name) {
			case "blockquote":
				if t.quote > 0 {
					t.quote--
				}
				t.breakLine(1)
			case "pre", "textarea", "xmp":
				if t.pre > 0 {
					t.pre--
				}
				t.breakLine(1)
			case "td", "th":
				t.pendSpace = true
			case "br":
				t.lineBreakTag()
			default:
				t.breakLine(blockBreak(name))
			}
		}
	}
}
