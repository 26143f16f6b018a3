package sasl

import (
	"testing"

	"github.com/stretchr/testify/require"
)

func TestSASLprep(t *testing.T) {
	for _, tc := range []struct {
		name, in, want string
		ok             bool
	}{
		// RFC 4013 §3, the examples.
		{"SOFT HYPHEN mapped to nothing", "I\u00ADX", "IX", true},
		{"no transformation", "user", "user", true},
		{"case preserved", "USER", "USER", true},
		{"output is NFKC", "\u00AA", "a", true},
		{"output is NFKC (ROMAN NUMERAL NINE)", "\u2168", "IX", true},
		{"prohibited character", "\u0007", "", false},
		{"bidirectional check", "\u0627\u0031", "", false},
		// §2.1: non-ASCII space to SPACE, B.1 to nothing.
		{"NO-BREAK SPACE", "a\u00A0b", "a b", true},
		{"IDEOGRAPHIC SPACE", "a\u3000b", "a b", true},
		{"ZERO WIDTH JOINER", "a\u200Db", "ab", true},
		{"VARIATION SELECTOR", "a\uFE0Fb", "ab", true},
		// §2.3: prohibited output.
		{"DEL", "a\x7Fb", "", false},
		{"C1 control", "a\u0085b", "", false},
		{"private use", "a\uE000b", "", false},
		{"non-character", "a\uFFFFb", "", false},
		{"surrogate code point as UTF-8", "a\xED\xA0\x80b", "", false},
		{"not UTF-8", "a\xFFb", "", false},
		// Query strings (RFC 4013 §2.5): unassigned in Unicode 3.2, allowed.
		{"emoji", "pw\U0001F600", "pw\U0001F600", true},
		// Right-to-left text on its own is fine (RFC 3454 §6).
		{"RTL", "\u0627\u0628", "\u0627\u0628", true},
		{"ASCII with space", "correct horse", "correct horse", true},
		{"empty", "", "", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, _, ok := saslprep([]byte(tc.in))
			require.Equal(t, tc.ok, ok)
			if ok {
				require.Equal(t, tc.want, string(out))
			}
		})
	}
}

func TestSASLprepKeepsPrintableASCIIInPlace(t *testing.T) {
	in := []byte("pencil ~!")
	out, copied, ok := saslprep(in)
	require.True(t, ok)
	require.False(t, copied)
	require.Same(t, &in[0], &out[0])

	in = []byte("pen\u00ADcil")
	out, copied, ok = saslprep(in)
	require.True(t, ok)
	require.True(t, copied)
	require.Equal(t, "pencil", string(out))
}
