package mimex

import (
	"unicode"
	"unicode/utf8"
)

// MaxPassageTokens bounds the tokens, as EstimateTokens counts them, of a
// passage Passages and SubjectPassage cut. It leaves a 512-token model
// (the smallest input window among common embedding models) room for its
// own special tokens and for the estimate being short, so no provider
// truncates or refuses a passage for its length. It is not configurable:
// every passage stored is cut to it, and a changed bound would cut every
// message anew.
const MaxPassageTokens = 400

// EstimateTokens estimates the tokens a subword tokenizer (WordPiece,
// SentencePiece, byte-pair encoding) makes of s, from above for common
// text: a Han, kana or Hangul character, and every punctuation mark or
// symbol, is a token of its own; four letters or digits of any other
// script make a token; whitespace makes none. An English passage of 1 000
// characters estimates at about 250 tokens; one of 1 000 Chinese
// characters at 1 000. It reads no vocabulary, so it counts no tokenizer
// exactly.
func EstimateTokens(s string) int { return (quarters(s) + 3) / 4 }

// tokenQuarters is r's weight in quarters of a token, so estimates of
// adjacent pieces add up.
func tokenQuarters(r rune) int {
	switch {
	case r < utf8.RuneSelf && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'):
		return 1
	case unicode.IsSpace(r):
		return 0
	case unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana, unicode.Hangul):
		return 4
	case unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.IsMark(r):
		return 1
	default:
		return 4
	}
}

// quarters is s's weight in quarters of a token.
func quarters(s string) int {
	q := 0
	for _, r := range s {
		q += tokenQuarters(r)
	}
	return q
}
