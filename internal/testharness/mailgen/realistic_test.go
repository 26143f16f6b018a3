package mailgen_test

import (
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/mailgen"
	"github.com/mailfathom/mailfathom/mimex"
)

// TestRealisticShape checks that a 1 500-message corpus has the mix and
// size shape Realistic promises, and that every fourth message reads as
// MIME with its headers decoded.
func TestRealisticShape(t *testing.T) {
	t.Parallel()
	const n = 1500
	kinds := map[mailgen.Kind]int{}
	var sizes []int
	total, nonASCIISubjects, trimmed := 0, 0, 0
	for i := range n {
		raw := mailgen.Realistic(7, i)
		require.Equal(t, raw, mailgen.Realistic(7, i), "deterministic")
		require.NotContains(t, strings.ReplaceAll(string(raw), "\r\n", ""), "\n", "message %d: CRLF line endings only", i)
		kinds[mailgen.RealisticKind(7, i)]++
		sizes = append(sizes, len(raw))
		total += len(raw)

		if i%4 != 0 {
			continue
		}
		res := mimex.Extract(raw, mimex.Limits{})
		require.True(t, res.Readable, "message %d (%s): %v", i, mailgen.RealisticKind(7, i), res.Failure)
		require.True(t, utf8.ValidString(res.Subject), "message %d", i)
		if strings.ContainsFunc(res.Subject, func(r rune) bool { return r >= 0x80 }) {
			nonASCIISubjects++
		}
		if res.Body.Text != res.Body.Untrimmed {
			trimmed++
		}
	}
	for _, m := range mailgen.Mix {
		share := float64(kinds[m.Kind]) / n * 100
		require.InDelta(t, m.Percent, share, 2, "%s", m.Kind)
	}
	slices.Sort(sizes)
	median, p99, mean := sizes[n/2], sizes[n*99/100], total/n
	t.Logf("median %.1f KB, mean %.1f KB, p99 %.2f MB, total %.0f MB; %d non-ASCII subjects, %d trimmed bodies",
		float64(median)/1e3, float64(mean)/1e3, float64(p99)/1e6, float64(total)/1e6, nonASCIISubjects, trimmed)
	require.InDelta(t, 10_600, median, 2_500, "median")
	require.InDelta(t, 68_000, mean, 15_000, "mean")
	require.InDelta(t, 1_200_000, p99, 350_000, "p99")
	require.Greater(t, nonASCIISubjects, n/40, "subjects in several languages")
	require.Greater(t, trimmed, n/24, "quoted replies and signatures at the end of a third")
}
