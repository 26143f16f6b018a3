package mimex

import (
	"testing"
)

// FuzzExtract feeds arbitrary bytes to the reader. It calls extract, not
// Extract, so that a panic is reported instead of being recovered into an
// Unparseable result, and checks what must hold of every Result.
func FuzzExtract(f *testing.F) {
	for _, tc := range allCases() {
		if len(tc.raw) <= 64<<10 {
			f.Add([]byte(tc.raw), uint16(tc.lim.MaxPartCount), uint8(tc.lim.MaxNestingDepth), uint16(tc.lim.MaxExtractedTextCharacters))
		}
	}
	f.Fuzz(func(t *testing.T, raw []byte, parts uint16, depth uint8, chars uint16) {
		lim := Limits{MaxPartCount: int(parts), MaxNestingDepth: int(depth), MaxExtractedTextCharacters: int(chars)}
		r := extract(raw, lim)
		checkInvariants(t, r, lim)
		again := extract(raw, lim)
		if again.Readable != r.Readable || again.Failure != r.Failure || again.Body.Text != r.Body.Text ||
			again.Attachments.Count != r.Attachments.Count {
			t.Fatalf("extraction is not deterministic")
		}
	})
}
