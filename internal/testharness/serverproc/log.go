package serverproc

import (
	"os"
	"strings"
)

// ReadLog returns the file at path as text, or "" when it cannot be read,
// as a log that a server has not written yet.
func ReadLog(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return string(b)
}

// Tail returns the last n lines of s.
func Tail(s string, n int) string {
	parts := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(parts) > n {
		parts = parts[len(parts)-n:]
	}
	return strings.Join(parts, "\n")
}
