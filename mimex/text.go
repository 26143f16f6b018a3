package mimex

import (
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// validUTF8 returns s unchanged when it is valid UTF-8. Otherwise every byte
// that is not part of a valid UTF-8 sequence is read as ISO-8859-1: raw 8-bit
// header and body text in mail is overwhelmingly Latin-1 or a superset of it,
// and reading it so keeps "café" a word instead of a replacement character.
func validUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b.WriteRune(rune(s[i]))
			i++
			continue
		}
		b.WriteString(s[i : i+size])
		i += size
	}
	return b.String()
}

// cutOnTextElement returns the longest prefix of s that ends on an extended
// grapheme cluster boundary and holds at most maxRunes scalar values and at
// most maxElements text elements (a bound <= 0 is not applied).
func cutOnTextElement(s string, maxElements, maxRunes int) (string, bool) {
	runeCount := utf8.RuneCountInString(s)
	fits := maxRunes <= 0 || runeCount <= maxRunes
	if fits && maxElements > 0 && runeCount > maxElements && uniseg.GraphemeClusterCount(s) > maxElements {
		fits = false
	}
	if fits {
		return s, false
	}
	state := -1
	rest := s
	end, elements, runes := 0, 0, 0
	for rest != "" {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		n := utf8.RuneCountInString(cluster)
		if maxElements > 0 && elements+1 > maxElements {
			break
		}
		if maxRunes > 0 && runes+n > maxRunes {
			break
		}
		elements++
		runes += n
		end += len(cluster)
	}
	return s[:end], end < len(s)
}

// textAcc accumulates body text up to a bound of Unicode scalar values,
// applied while the text arrives: once it holds one scalar beyond the bound it
// refuses more, and finish cuts it back onto the last text-element boundary
// within the bound. The one extra scalar is what decides whether the bound
// itself falls on a boundary.
//
// Line endings are normalised to "\n"; NUL and the other control characters
// except TAB and line feed are dropped (PostgreSQL text cannot hold NUL, and
// the rest are not words), as is U+FEFF.
type textAcc struct {
	b       []byte
	runes   int
	limit   int
	full    bool
	started bool
	lastCR  bool
	carry   [utf8.UTFMax]byte
	ncarry  int
}

func newTextAcc(limit int) textAcc { return textAcc{limit: limit} }

func (a *textAcc) reset() {
	a.b = a.b[:0]
	a.runes = 0
	a.full = false
	a.started = false
	a.lastCR = false
	a.ncarry = 0
}

// writeBytes appends raw decoded bytes; invalid UTF-8 bytes are read as
// ISO-8859-1. A sequence split across two calls is joined.
func (a *textAcc) writeBytes(p []byte) {
	for len(p) > 0 && !a.full {
		if a.ncarry > 0 {
			// Complete the carried sequence byte by byte.
			a.carry[a.ncarry] = p[0]
			a.ncarry++
			p = p[1:]
			if utf8.FullRune(a.carry[:a.ncarry]) {
				r, size := utf8.DecodeRune(a.carry[:a.ncarry])
				if r == utf8.RuneError && size == 1 {
					// Not a sequence after all: the first byte is Latin-1,
					// the remaining ones are re-read.
					a.writeRune(rune(a.carry[0]))
					rest := append([]byte(nil), a.carry[1:a.ncarry]...)
					a.ncarry = 0
					a.writeBytes(rest)
					continue
				}
				a.writeRune(r)
				a.ncarry = 0
			}
			continue
		}
		// Fast path: a run of printable ASCII, TAB and LF is appended as it
		// is, up to the room left below the bound.
		if !a.started {
			skip := 0
			for skip < len(p) && (p[skip] == ' ' || p[skip] == '\t' || p[skip] == '\n') {
				skip++
			}
			if skip > 0 {
				a.lastCR = false
				p = p[skip:]
				continue
			}
		}
		room := len(p)
		if a.limit > 0 && a.limit-a.runes < room {
			room = a.limit - a.runes
		}
		n := 0
		for n < room {
			c := p[n]
			if c >= 0x20 && c < 0x7F || c == '\t' || c == '\n' && (n > 0 || !a.lastCR) {
				n++
				continue
			}
			break
		}
		if n > 0 {
			a.started = true
			a.b = append(a.b, p[:n]...)
			a.runes += n
			a.lastCR = false
			p = p[n:]
			continue
		}
		c := p[0]
		if c < utf8.RuneSelf {
			a.writeRune(rune(c))
			p = p[1:]
			continue
		}
		if !utf8.FullRune(p) {
			a.ncarry = copy(a.carry[:], p)
			return
		}
		r, size := utf8.DecodeRune(p)
		if r == utf8.RuneError && size == 1 {
			r = rune(c)
		}
		a.writeRune(r)
		p = p[size:]
	}
}

// flush reads a sequence left incomplete at the end of a part as ISO-8859-1.
func (a *textAcc) flush() {
	n := a.ncarry
	a.ncarry = 0
	for i := 0; i < n; i++ {
		a.writeRune(rune(a.carry[i]))
	}
}

func (a *textAcc) writeString(s string) {
	for _, r := range s {
		if a.full {
			return
		}
		a.writeRune(r)
	}
}

func (a *textAcc) writeRune(r rune) {
	if a.full {
		return
	}
	switch {
	case r == '\r':
		a.lastCR = true
		a.appendRune('\n')
		return
	case r == '\n':
		if a.lastCR {
			a.lastCR = false
			return
		}
	case r == '\t':
	case r == 0xFEFF:
		a.lastCR = false
		return
	case r < 0x20 || (r >= 0x7F && r < 0xA0):
		a.lastCR = false
		return
	}
	a.lastCR = false
	a.appendRune(r)
}

func (a *textAcc) appendRune(r rune) {
	if !a.started {
		// Leading white space carries nothing and does not count against
		// the bound.
		if unicode.IsSpace(r) {
			return
		}
		a.started = true
	}
	a.b = utf8.AppendRune(a.b, r)
	a.runes++
	if a.limit > 0 && a.runes > a.limit {
		a.full = true
	}
}

// hasWords reports whether the accumulated text holds anything but white
// space.
func (a *textAcc) hasWords() bool {
	for _, r := range string(a.b) {
		if !unicode.IsSpace(r) {
			return true
		}
	}
	return false
}

// finish returns the accumulated text, cut onto a text-element boundary when
// the bound was reached, and whether it was cut. Trailing white space (the
// line end before a part's delimiter, blank lines) carries nothing and is
// dropped.
func (a *textAcc) finish() (string, bool) {
	s := string(a.b)
	cut := false
	if a.full {
		s, _ = cutOnTextElement(s, 0, a.limit)
		cut = true
	}
	return strings.TrimRightFunc(s, unicode.IsSpace), cut
}
