package mimex

import (
	"bytes"
	"encoding/base64"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestMeasureBase64MatchesDecoding checks the counting shortcut against the
// decoder for every padding case and folded lines.
func TestMeasureBase64MatchesDecoding(t *testing.T) {
	t.Parallel()
	for n := range 200 {
		raw := bytes.Repeat([]byte{0xA5}, n)
		enc := base64.StdEncoding.EncodeToString(raw)
		var folded strings.Builder
		for len(enc) > 76 {
			folded.WriteString(enc[:76] + "\r\n")
			enc = enc[76:]
		}
		folded.WriteString(enc + "\r\n")
		w := &walker{buf: make([]byte, 512)}
		require.Equal(t, int64(n), w.measureBase64(strings.NewReader(folded.String())), "n=%d", n)
	}
}
