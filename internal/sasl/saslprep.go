package sasl

import (
	"unicode/utf8"

	"github.com/xdg-go/stringprep"
)

// saslprepQuery is the SASLprep profile of stringprep (RFC 4013 §2, on the
// tables of RFC 3454) for query strings: non-ASCII spaces (C.1.2) map to
// SPACE, the "commonly mapped to nothing" characters (B.1) are removed, the
// result is normalized with NFKC, prohibited output (C.1.2, C.2.1, C.2.2,
// C.3 to C.9) is refused, and so is a string breaking the bidirectional
// rules (RFC 3454 §6).
//
// Unassigned code points (A.1) are allowed, as RFC 4013 §2.5 and RFC 3454 §7
// do for query strings and as RFC 5802 §5.1 asks for the user name: a client
// prepares what it sends, it does not store it. stringprep.SASLprep is the
// stored-string profile and would refuse, for example, any emoji, which
// Unicode 3.2 did not assign.
var saslprepQuery = stringprep.Profile{
	Mappings:  []stringprep.Mapping{stringprep.TableB1, nonASCIISpaceToSpace},
	Normalize: true,
	Prohibits: []stringprep.Set{
		stringprep.TableC1_2,
		stringprep.TableC2_1,
		stringprep.TableC2_2,
		stringprep.TableC3,
		stringprep.TableC4,
		stringprep.TableC5,
		stringprep.TableC6,
		stringprep.TableC7,
		stringprep.TableC8,
		stringprep.TableC9,
	},
	CheckBiDi: true,
}

// nonASCIISpaceToSpace maps the characters of RFC 3454 table C.1.2 to
// U+0020 (RFC 4013 §2.1).
var nonASCIISpaceToSpace = stringprep.Mapping{
	0x00A0: {0x20}, 0x1680: {0x20}, 0x2000: {0x20}, 0x2001: {0x20},
	0x2002: {0x20}, 0x2003: {0x20}, 0x2004: {0x20}, 0x2005: {0x20},
	0x2006: {0x20}, 0x2007: {0x20}, 0x2008: {0x20}, 0x2009: {0x20},
	0x200A: {0x20}, 0x200B: {0x20}, 0x202F: {0x20}, 0x205F: {0x20},
	0x3000: {0x20},
}

// saslprep applies saslprepQuery to b. Printable ASCII (U+0020 to U+007E)
// is left unchanged by every step, so such input is returned as is, without
// a string copy: the common password stays in memory its owner clears.
// Otherwise the result is a new slice, and copied is true. ok is false when
// b is not UTF-8 or the profile refuses it; which character was at fault is
// not reported, as it is part of a secret.
func saslprep(b []byte) (out []byte, copied, ok bool) {
	if printableASCII(b) {
		return b, false, true
	}
	if !utf8.Valid(b) {
		return nil, false, false
	}
	s, err := saslprepQuery.Prepare(string(b))
	if err != nil {
		return nil, false, false
	}
	return []byte(s), true, true
}

func printableASCII(b []byte) bool {
	for _, c := range b {
		if c < 0x20 || c > 0x7E {
			return false
		}
	}
	return true
}
