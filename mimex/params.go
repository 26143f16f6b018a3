package mimex

import (
	"io"
	"mime"
	"sort"
	"strconv"
	"strings"

	"github.com/emersion/go-message"
)

// headerParams is a parsed Content-Type or Content-Disposition value: the
// lower-cased token before the first ';' and the parameters after it, keyed by
// lower-cased name, RFC 2231 continuations stitched and decoded.
type headerParams struct {
	value  string
	params map[string]string
}

func (h headerParams) param(name string) string {
	if h.params == nil {
		return ""
	}
	return h.params[name]
}

// parseHeaderParams parses a structured header value leniently. The standard
// library's mime.ParseMediaType refuses the whole value when one parameter is
// malformed, and the most common malformation in real mail is an unquoted
// boundary containing '=' (boundary=----=_NextPart_000_0001): a strict parse
// would lose the boundary and with it every part of an ordinary message. Here
// an unquoted value runs to the next ';', a quoted one to its closing quote
// (or the end of the field when the quote is never closed), the first
// occurrence of a duplicated parameter wins, and an RFC 2231 extended value
// (name*=charset'lang'pct, name*0*=…, name*1=…) takes precedence over the plain
// one and is decoded in any charset the charset package knows.
func parseHeaderParams(v string) headerParams {
	var out headerParams
	head, rest, _ := strings.Cut(v, ";")
	out.value = strings.ToLower(strings.TrimSpace(stripComments(head)))
	if strings.TrimSpace(rest) == "" {
		return out
	}

	var plain map[string]string
	var ext map[string]map[string]string // base name -> section key ("", "0", "0*", "1", …) -> raw value
	for rest != "" {
		var seg string
		seg, rest = nextParamSegment(rest)
		name, val, ok := strings.Cut(seg, "=")
		if !ok {
			continue
		}
		name = strings.ToLower(strings.TrimSpace(name))
		if name == "" {
			continue
		}
		val = unquoteParamValue(strings.TrimSpace(val))
		if base, section, isExt := strings.Cut(name, "*"); isExt {
			if ext == nil {
				ext = make(map[string]map[string]string)
			}
			m := ext[base]
			if m == nil {
				m = make(map[string]string)
				ext[base] = m
			}
			if _, dup := m[section]; !dup {
				m[section] = val
			}
			continue
		}
		if plain == nil {
			plain = make(map[string]string)
		}
		if _, dup := plain[name]; !dup {
			if name == "name" || name == "filename" {
				// RFC 2047 does not allow encoded-words in a parameter,
				// but senders write them there and readers decode them.
				val = decodeWords(val)
			}
			plain[name] = val
		}
	}
	out.params = plain
	for base, sections := range ext {
		if decoded, ok := decodeRFC2231(sections); ok {
			if out.params == nil {
				out.params = make(map[string]string)
			}
			out.params[base] = decoded
		}
	}
	return out
}

// nextParamSegment returns the text up to the next ';' that is not inside a
// quoted string, and what follows it.
func nextParamSegment(s string) (seg, rest string) {
	inQuote := false
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case inQuote && c == '\\':
			i++
		case c == '"':
			inQuote = !inQuote
		case !inQuote && c == ';':
			return s[:i], s[i+1:]
		}
	}
	return s, ""
}

// unquoteParamValue removes the quotes of a quoted-string (resolving its
// quoted pairs) and leaves an unquoted value as it is.
func unquoteParamValue(v string) string {
	if !strings.HasPrefix(v, `"`) {
		return v
	}
	var b strings.Builder
	for i := 1; i < len(v); i++ {
		c := v[i]
		switch {
		case c == '\\' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case c == '"':
			return b.String()
		default:
			b.WriteByte(c)
		}
	}
	return b.String() // never closed: the rest of the field
}

// stripComments removes RFC 822 parenthesised comments outside quoted strings.
func stripComments(s string) string {
	if !strings.Contains(s, "(") {
		return s
	}
	var b strings.Builder
	depth, inQuote := 0, false
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\\' && (inQuote || depth > 0):
			if depth == 0 {
				b.WriteByte(c)
				if i+1 < len(s) {
					b.WriteByte(s[i+1])
				}
			}
			i++
		case depth == 0 && c == '"':
			inQuote = !inQuote
			b.WriteByte(c)
		case !inQuote && c == '(':
			depth++
		case !inQuote && depth > 0 && c == ')':
			depth--
		case depth == 0:
			b.WriteByte(c)
		}
	}
	return b.String()
}

// decodeRFC2231 stitches and decodes the sections of one RFC 2231 parameter.
// sections is keyed by what followed the first '*' of the parameter name:
// "" for name*, "0" / "0*" / "1" / "1*" … for continuations.
func decodeRFC2231(sections map[string]string) (string, bool) {
	if v, ok := sections[""]; ok {
		return decodeExtValue(v)
	}
	type piece struct {
		n       int
		encoded bool
		v       string
	}
	pieces := make([]piece, 0, len(sections))
	for k, v := range sections {
		num, encoded := strings.CutSuffix(k, "*")
		n, err := strconv.Atoi(num)
		if err != nil || n < 0 || n > 999 {
			continue
		}
		pieces = append(pieces, piece{n, encoded, v})
	}
	sort.Slice(pieces, func(i, j int) bool { return pieces[i].n < pieces[j].n })
	var raw strings.Builder
	charset := ""
	for i, p := range pieces {
		if p.n != i {
			break // a gap ends the value, as RFC 2231 reads it
		}
		if !p.encoded {
			raw.WriteString(p.v)
			continue
		}
		v := p.v
		if p.n == 0 {
			cs, afterCS, ok := strings.Cut(v, "'")
			if ok {
				if _, afterLang, ok2 := strings.Cut(afterCS, "'"); ok2 {
					charset, v = cs, afterLang
				}
			}
		}
		raw.WriteString(percentDecode(v))
	}
	if raw.Len() == 0 {
		return "", false
	}
	return convertCharset(charset, raw.String()), true
}

// decodeExtValue decodes charset'language'percent-encoded.
func decodeExtValue(v string) (string, bool) {
	cs, rest, ok := strings.Cut(v, "'")
	if !ok {
		return percentDecode(v), true
	}
	_, val, ok := strings.Cut(rest, "'")
	if !ok {
		val = rest
	}
	return convertCharset(cs, percentDecode(val)), true
}

func percentDecode(s string) string {
	if !strings.Contains(s, "%") {
		return s
	}
	b := make([]byte, 0, len(s))
	for i := 0; i < len(s); i++ {
		if s[i] == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]) {
			b = append(b, unhex(s[i+1])<<4|unhex(s[i+2]))
			i += 2
			continue
		}
		b = append(b, s[i])
	}
	return string(b)
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

func unhex(c byte) byte {
	switch {
	case '0' <= c && c <= '9':
		return c - '0'
	case 'a' <= c && c <= 'f':
		return c - 'a' + 10
	default:
		return c - 'A' + 10
	}
}

// convertCharset converts raw bytes in the named charset to UTF-8 with the
// go-message charset tables; an unknown charset, or none, leaves the bytes
// for validUTF8 to repair.
func convertCharset(charset, raw string) string {
	charset = strings.ToLower(strings.TrimSpace(charset))
	switch charset {
	case "", "utf-8", "utf8", "us-ascii", "ascii":
		return validUTF8(raw)
	}
	if message.CharsetReader == nil {
		return validUTF8(raw)
	}
	r, err := message.CharsetReader(charset, strings.NewReader(raw))
	if err != nil || r == nil {
		return validUTF8(raw)
	}
	out, err := io.ReadAll(io.LimitReader(r, int64(4*len(raw)+16)))
	if err != nil {
		return validUTF8(raw)
	}
	return validUTF8(string(out))
}

// wordDecoder decodes RFC 2047 encoded-words with the go-message charset
// tables.
var wordDecoder = &mime.WordDecoder{CharsetReader: func(charset string, input io.Reader) (io.Reader, error) {
	switch strings.ToLower(charset) {
	case "utf-8", "us-ascii":
		return input, nil
	}
	if message.CharsetReader == nil {
		return nil, errUnknownCharset
	}
	return message.CharsetReader(strings.ToLower(charset), input)
}}

type constError string

func (e constError) Error() string { return string(e) }

const errUnknownCharset = constError("mimex: unknown charset")

// decodeWords decodes RFC 2047 encoded-words in an unstructured header value
// (or a parameter value, where senders use them although RFC 2047 does not
// allow it). Words are decoded one at a time, so one in an unknown charset is
// kept as written without losing the others; white space between two
// encoded-words is dropped, as RFC 2047 says.
func decodeWords(s string) string {
	if !strings.Contains(s, "=?") {
		return validUTF8(s)
	}
	var b strings.Builder
	b.Grow(len(s))
	prevDecoded := false
	for s != "" {
		start := strings.Index(s, "=?")
		if start < 0 {
			b.WriteString(s)
			break
		}
		n := encodedWordLen(s[start:])
		if n < 0 {
			b.WriteString(s[:start+2])
			s = s[start+2:]
			prevDecoded = false
			continue
		}
		between, word := s[:start], s[start:start+n]
		s = s[start+n:]
		dec, err := wordDecoder.Decode(word)
		if err != nil {
			b.WriteString(between)
			b.WriteString(word)
			prevDecoded = false
			continue
		}
		if !prevDecoded || strings.TrimLeft(between, " \t") != "" {
			b.WriteString(between)
		}
		b.WriteString(dec)
		prevDecoded = true
	}
	return validUTF8(b.String())
}

// encodedWordLen returns the length of the encoded-word w starts with
// ("=?charset?e?text?="), or -1.
func encodedWordLen(w string) int {
	i := strings.IndexByte(w[2:], '?')
	if i < 1 {
		return -1
	}
	i += 2
	if len(w) < i+3 || w[i+2] != '?' {
		return -1
	}
	end := strings.Index(w[i+3:], "?=")
	if end < 0 {
		return -1
	}
	word := w[:i+3+end+2]
	if strings.ContainsAny(word, " \t\r\n") {
		return -1
	}
	return len(word)
}
