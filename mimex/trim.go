package mimex

import (
	"regexp"
	"strings"
	"unicode/utf8"
)

const (
	// MaxSignatureLines is how many lines may follow an RFC 3676 "-- "
	// separator for what follows it to be trimmed as a signature.
	MaxSignatureLines = 20

	// MaxAttributionCharacters bounds an "On … wrote:" attribution line (two
	// physical lines at most, joined, since clients wrap long ones).
	MaxAttributionCharacters = 200
)

var (
	// separatorLine matches a forwarded or quoted message separator such as
	// "-----Original Message-----" or "---------- Forwarded message ---------",
	// alone on its line.
	separatorLine = regexp.MustCompile(`(?i)^\s*-{2,}\s*(original message|forwarded message)\s*-{2,}\s*$`)

	// attributionLine is anchored on both ends: it starts with "On " and the
	// line ends with "wrote:".
	attributionLine = regexp.MustCompile(`^On\s.*\swrote:$`)
)

// trimQuoted removes quoted history and a signature from the end of text, and
// nowhere else. Three conventions are recognized:
//
//  1. a "-----Original Message-----" style separator: everything from the
//     topmost one on is removed, because the topmost is the outermost;
//  2. a trailing run of ">"-prefixed lines together with the "On … wrote:"
//     attribution line directly above it (anchored at both ends and at most
//     MaxAttributionCharacters long, so prose merely ending in "wrote:" is
//     not one); a run without such a line is left alone;
//  3. the RFC 3676 "-- " signature separator with at most MaxSignatureLines
//     lines after it.
//
// Conventions 2 and 3 are applied repeatedly, in either order, to what is
// left, so a signature below a quote and a quote below a signature are both
// removed. When the text was cut at the extraction bound its end is not the
// message's end, so the signature rule — the only one that depends on how far
// the end is — is not applied. If trimming would leave nothing (a message
// that is entirely a quote), nothing is trimmed.
func trimQuoted(text string, truncated bool) string {
	lines := strings.Split(text, "\n")
	n := len(lines)
	for n > 0 && strings.TrimSpace(lines[n-1]) == "" {
		n--
	}
	untouched := n

	for i := 0; i < n; i++ {
		if len(lines[i]) <= 100 && strings.Contains(lines[i], "--") && separatorLine.MatchString(lines[i]) {
			n = i
			break
		}
	}

	for {
		for n > 0 && strings.TrimSpace(lines[n-1]) == "" {
			n--
		}
		if m := trimQuoteRun(lines[:n]); m < n {
			n = m
			continue
		}
		if !truncated {
			if m := trimSignature(lines[:n]); m < n {
				n = m
				continue
			}
		}
		break
	}
	for n > 0 && strings.TrimSpace(lines[n-1]) == "" {
		n--
	}

	trimmed := strings.Join(lines[:n], "\n")
	if strings.TrimSpace(trimmed) == "" {
		return text
	}
	if n == untouched {
		return text
	}
	return trimmed
}

// trimQuoteRun returns the number of lines to keep when lines end in a
// quoted run with an attribution directly above it, or len(lines).
func trimQuoteRun(lines []string) int {
	n := len(lines)
	i := n
	for i > 0 && strings.HasPrefix(strings.TrimLeft(lines[i-1], " \t"), ">") {
		i--
	}
	if i == n || i == 0 {
		return n
	}
	// One physical line, or two when the client wrapped it.
	one := strings.TrimSpace(lines[i-1])
	if isAttribution(one) {
		return i - 1
	}
	if i >= 2 {
		two := strings.TrimSpace(lines[i-2]) + " " + one
		if strings.TrimSpace(lines[i-2]) != "" && one != "" && isAttribution(two) {
			return i - 2
		}
	}
	return n
}

func isAttribution(s string) bool {
	return utf8.RuneCountInString(s) <= MaxAttributionCharacters && attributionLine.MatchString(s)
}

// trimSignature returns the number of lines to keep when the last "-- " line
// has at most MaxSignatureLines lines after it, or len(lines).
func trimSignature(lines []string) int {
	n := len(lines)
	for i := n - 1; i >= 0 && n-1-i <= MaxSignatureLines; i-- {
		if lines[i] == "-- " {
			return i
		}
	}
	return n
}
