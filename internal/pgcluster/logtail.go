package pgcluster

import (
	"io"
	"os"
	"strings"
)

// logTailBytes is how much of the server log a start error quotes.
const logTailBytes = 3000

// logSince returns what the log at path gained after offset, cut to its
// last max bytes.
func logSince(path string, offset int64, max int) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	if fi, err := f.Stat(); err == nil && fi.Size()-offset > int64(max) {
		offset = fi.Size() - int64(max)
	}
	b, err := io.ReadAll(io.NewSectionReader(f, offset, 1<<30))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// tail returns the last max bytes of s.
func tail(s string, max int) string {
	if len(s) > max {
		return "…" + s[len(s)-max:]
	}
	return s
}
