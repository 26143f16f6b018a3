package mimex

import (
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxFileNameTextElements bounds a sanitized attachment file name, counted
	// in text elements (extended grapheme clusters).
	MaxFileNameTextElements = 200

	// maxFileNameRunes is a backstop beneath MaxFileNameTextElements: a text
	// element may carry any number of combining marks, so 200 of them are not
	// by themselves a bound on length. Ordinary names never come near it.
	maxFileNameRunes = 4 * MaxFileNameTextElements
)

// SanitizeFileName turns a decoded attachment file name (RFC 2047 and
// RFC 2231 already resolved by the caller) into one that is safe to store and
// show:
//
//   - control (Unicode Cc) and formatting (Cf: bidirectional embeddings,
//     overrides and isolates, zero-width characters, the byte order mark, tag
//     characters, …) characters are removed scalar by scalar, and so are bytes
//     that are not valid UTF-8;
//   - only the segment after the last '/', '\' or ':' is kept, so the result
//     is never a path; a remaining "." or ".." is a path segment rather than a
//     name and leaves nothing;
//   - surrounding white space is trimmed;
//   - the result is cut to MaxFileNameTextElements text elements, on a text
//     element boundary, so a name is never cut through an emoji or a
//     combining sequence.
//
// repaired reports that any of this changed a non-empty input. unnamed reports
// that nothing usable is left; no synthetic name is made up, because it would
// be indistinguishable from one the sender wrote.
func SanitizeFileName(decoded string) (name string, repaired bool, unnamed bool) {
	if decoded == "" {
		return "", false, true
	}
	var b strings.Builder
	b.Grow(len(decoded))
	for i := 0; i < len(decoded); {
		r, size := utf8.DecodeRuneInString(decoded[i:])
		i += size
		if r == utf8.RuneError && size == 1 {
			continue
		}
		if unicode.Is(unicode.Cc, r) || unicode.Is(unicode.Cf, r) {
			continue
		}
		b.WriteRune(r)
	}
	s := b.String()
	if i := strings.LastIndexAny(s, `/\:`); i >= 0 {
		s = s[i+1:]
	}
	s = strings.TrimSpace(s)
	if s == "." || s == ".." {
		s = ""
	}
	s, _ = cutOnTextElement(s, MaxFileNameTextElements, maxFileNameRunes)
	// A cut can leave white space at the new end.
	s = strings.TrimRightFunc(s, unicode.IsSpace)
	return s, s != decoded, s == ""
}
