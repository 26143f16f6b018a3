package mimex

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/rivo/uniseg"
	"github.com/stretchr/testify/require"
)

func TestPassages(t *testing.T) {
	t.Parallel()

	t.Run("ShortParagraphsJoinIntoOnePassage", func(t *testing.T) {
		t.Parallel()
		got := Passages("First paragraph.\n\n  \nSecond one.\n", 100, 10)
		require.Equal(t, []string{"First paragraph.\n\nSecond one."}, got)
	})

	t.Run("ParagraphsThatDoNotFitStartANewPassage", func(t *testing.T) {
		t.Parallel()
		a, b := strings.Repeat("a", 30), strings.Repeat("b", 30)
		got := Passages(a+"\n\n"+b, 50, 10)
		require.Equal(t, []string{a, b}, got)
	})

	t.Run("LongParagraphIsCutBetweenSentences", func(t *testing.T) {
		t.Parallel()
		text := "The meeting moved to Tuesday. Bring the quarterly figures. The room is on the third floor."
		got := Passages(text, 60, 10)
		require.Equal(t, []string{
			"The meeting moved to Tuesday. Bring the quarterly figures.",
			"The room is on the third floor.",
		}, got)
	})

	t.Run("LongSentenceIsCutOnTextElements", func(t *testing.T) {
		t.Parallel()
		// "e" followed by a combining acute accent is one text element of
		// two scalar values; a cut must never separate them.
		text := strings.Repeat("e\u0301", 40)
		got := Passages(text, 7, 100)
		for _, p := range got {
			require.LessOrEqual(t, utf8.RuneCountInString(p), 7)
			require.Equal(t, 0, utf8.RuneCountInString(p)%2, "a passage ends inside a text element: %q", p)
			require.Equal(t, uniseg.GraphemeClusterCount(p)*2, utf8.RuneCountInString(p))
		}
		require.Equal(t, text, strings.Join(got, ""))
	})

	t.Run("CountIsBounded", func(t *testing.T) {
		t.Parallel()
		var paras []string
		for range 20 {
			paras = append(paras, strings.Repeat("word ", 10))
		}
		got := Passages(strings.Join(paras, "\n\n"), 60, 3)
		require.Len(t, got, 3)
	})

	t.Run("DefaultsApply", func(t *testing.T) {
		t.Parallel()
		got := Passages(strings.Repeat("Sentence number one goes here. ", 2000), 0, 0)
		require.Len(t, got, MaxPassages)
		for _, p := range got {
			require.LessOrEqual(t, utf8.RuneCountInString(p), MaxPassageChars)
		}
	})

	t.Run("DenseScriptsAreBoundedByTokens", func(t *testing.T) {
		t.Parallel()
		// 1 000 Han characters in one paragraph, and short paragraphs of
		// them, are within MaxPassageChars but not a 512-token window.
		sentence := strings.Repeat("会议改到星期二请带上季度数字", 5) + "。"
		long := strings.Repeat(sentence, 14)
		short := strings.Repeat(sentence+"\n\n", 14)
		for _, text := range []string{long, short, strings.Repeat("会", 3000)} {
			got := Passages(text, 0, 0)
			require.NotEmpty(t, got)
			for _, p := range got {
				require.LessOrEqual(t, EstimateTokens(p), MaxPassageTokens)
				require.LessOrEqual(t, utf8.RuneCountInString(p), MaxPassageChars)
			}
		}
		subject := SubjectPassage(strings.Repeat("会议", 600))
		require.LessOrEqual(t, EstimateTokens(subject), MaxPassageTokens)
		require.Equal(t, MaxPassageTokens, utf8.RuneCountInString(subject))
	})

	t.Run("EnglishKeepsItsCharacterBound", func(t *testing.T) {
		t.Parallel()
		text := strings.Repeat("The meeting moved to Tuesday, bring the quarterly figures. ", 40)
		got := Passages(text, 0, 0)
		require.Greater(t, utf8.RuneCountInString(got[0]), MaxPassageChars-80, "English is cut by characters, not tokens")
		require.InDelta(t, 250, EstimateTokens(got[0]), 50)
	})

	t.Run("WhitespaceOnlyHasNoPassage", func(t *testing.T) {
		t.Parallel()
		require.Empty(t, Passages(" \n\n\t\n", 100, 10))
	})
}

func FuzzPassages(f *testing.F) {
	f.Add("Hello.\n\nWorld, how are you? Fine.", 10, 3)
	f.Add(strings.Repeat("e\u0301", 30), 5, 4)
	f.Fuzz(func(t *testing.T, text string, maxChars, maxCount int) {
		if !utf8.ValidString(text) {
			return
		}
		maxChars, maxCount = 1+abs(maxChars)%200, 1+abs(maxCount)%20
		got := Passages(text, maxChars, maxCount)
		require.LessOrEqual(t, len(got), maxCount)
		for _, p := range got {
			require.NotEmpty(t, strings.TrimSpace(p))
			require.LessOrEqual(t, utf8.RuneCountInString(p), maxChars)
			require.LessOrEqual(t, EstimateTokens(p), MaxPassageTokens)
			require.True(t, utf8.ValidString(p))
		}
	})
}

func abs(n int) int {
	if n < 0 {
		return -n
	}
	return n
}
