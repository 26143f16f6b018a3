package mimex

import (
	"strings"
	"unicode/utf8"

	"github.com/rivo/uniseg"
)

// Bounds of the passages Passages cuts a body text into. A passage of
// MaxPassageChars is about 250 tokens for an English text, inside the input
// window of every common embedding model, so no provider truncates one
// silently; text of denser scripts (Chinese, Japanese, Korean) is bounded
// sooner, by MaxPassageTokens. MaxPassages bounds what one message costs to embed and store
// (together 32 000 characters: the start of a long message, which is what a
// reader looks at too).
const (
	MaxPassageChars = 1000
	MaxPassages     = 32
)

// Passages cuts text — a message's trimmed body text — into at most
// maxCount passages of at most maxChars Unicode scalar values and at most
// MaxPassageTokens estimated tokens (EstimateTokens) each (bounds <= 0 take
// MaxPassages and MaxPassageChars), in reading order.
//
// Paragraphs (separated by a blank line) are kept whole and joined while
// they fit one passage; a paragraph longer than a passage is cut between
// its sentences (Unicode sentence boundaries), and a sentence longer than
// a passage between its text elements (extended grapheme clusters), so a
// cut never splits a user-perceived character. Whitespace at the ends of a
// passage is dropped and a passage of whitespace only is not returned.
// Text beyond maxCount passages is not returned: Passages is a bounded
// view, not a lossless one, and the lexical index still holds all of it.
func Passages(text string, maxChars, maxCount int) []string {
	if maxChars <= 0 {
		maxChars = MaxPassageChars
	}
	if maxCount <= 0 {
		maxCount = MaxPassages
	}
	p := passageBuilder{maxChars: maxChars, maxCount: maxCount}
	for _, para := range paragraphs(text) {
		if p.full() {
			break
		}
		if utf8.RuneCountInString(para) <= maxChars && quarters(para) <= 4*MaxPassageTokens {
			p.add(para, "\n\n")
			continue
		}
		p.flush()
		state := -1
		rest := para
		for rest != "" && !p.full() {
			var sentence string
			sentence, rest, state = uniseg.FirstSentenceInString(rest, state)
			sentence = strings.TrimSpace(sentence)
			for sentence != "" && !p.full() {
				piece := cutWithin(sentence, maxChars, 4*MaxPassageTokens)
				if piece == "" {
					// A single text element longer than a passage: cut it on
					// a scalar value instead, as nothing smaller exists.
					_, size := utf8.DecodeRuneInString(sentence)
					piece = sentence[:size]
				}
				p.add(strings.TrimSpace(piece), " ")
				sentence = strings.TrimSpace(sentence[len(piece):])
			}
		}
		p.flush()
	}
	p.flush()
	return p.out
}

// paragraphs splits text on blank lines (lines holding whitespace only) and
// returns the non-empty paragraphs, trimmed.
func paragraphs(text string) []string {
	var out []string
	var cur []string
	end := func() {
		if para := strings.TrimSpace(strings.Join(cur, "\n")); para != "" {
			out = append(out, para)
		}
		cur = cur[:0]
	}
	for line := range strings.SplitSeq(text, "\n") {
		if strings.TrimSpace(line) == "" {
			end()
			continue
		}
		cur = append(cur, line)
	}
	end()
	return out
}

// cutWithin returns the longest prefix of s that ends on an extended
// grapheme cluster boundary and holds at most maxRunes scalar values and
// at most maxQuarters quarters of an estimated token.
func cutWithin(s string, maxRunes, maxQuarters int) string {
	state := -1
	rest := s
	end, runes, q := 0, 0, 0
	for rest != "" {
		var cluster string
		cluster, rest, _, state = uniseg.FirstGraphemeClusterInString(rest, state)
		n, w := utf8.RuneCountInString(cluster), quarters(cluster)
		if runes+n > maxRunes || q+w > maxQuarters {
			break
		}
		runes += n
		q += w
		end += len(cluster)
	}
	return s[:end]
}

// passageBuilder joins pieces into passages of at most maxChars and
// MaxPassageTokens.
type passageBuilder struct {
	maxChars, maxCount int
	cur                strings.Builder
	curChars           int
	curQuarters        int
	out                []string
}

func (p *passageBuilder) full() bool { return len(p.out) >= p.maxCount }

// add appends piece (at most maxChars long) to the open passage, separated
// by sep, or opens a new passage when it does not fit.
func (p *passageBuilder) add(piece, sep string) {
	if piece == "" || p.full() {
		return
	}
	n, q := utf8.RuneCountInString(piece), quarters(piece)
	if p.curChars > 0 && (p.curChars+len(sep)+n > p.maxChars || p.curQuarters+q > 4*MaxPassageTokens) {
		p.flush()
		if p.full() {
			return
		}
	}
	if p.curChars > 0 {
		p.cur.WriteString(sep)
		p.curChars += len(sep)
	}
	p.cur.WriteString(piece)
	p.curChars += n
	p.curQuarters += q
}

func (p *passageBuilder) flush() {
	if p.curChars == 0 || p.full() {
		p.cur.Reset()
		p.curChars, p.curQuarters = 0, 0
		return
	}
	p.out = append(p.out, p.cur.String())
	p.cur.Reset()
	p.curChars, p.curQuarters = 0, 0
}

// SubjectPassage is the passage a subject makes: its whitespace runs
// collapsed to one space, cut to MaxPassageChars and MaxPassageTokens on
// a text-element boundary; "" for a subject of whitespace only.
func SubjectPassage(subject string) string {
	return cutWithin(strings.Join(strings.Fields(subject), " "), MaxPassageChars, 4*MaxPassageTokens)
}
