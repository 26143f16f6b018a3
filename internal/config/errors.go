package config

import (
	"strings"

	"github.com/mailfathom/mailfathom/internal/failure"
)

// Problem is one thing wrong with the configuration, attributed to the
// variable it concerns. Its text never contains the value of a secret
// reference or of the database URL.
type Problem struct {
	// Variable is the environment variable the problem concerns. A rule
	// between several variables names the one to change; the message names
	// the others.
	Variable string
	// Message states the rule that was broken.
	Message string
	// Rule is the stable identity of a violated transport-security rule,
	// such as UnencryptedConnectionRequiresExplicitOptIn, or empty for
	// every other problem. It is appended to the text in brackets.
	Rule string
}

// String returns "VARIABLE: message", followed by " [Rule]" when Rule is set.
func (p Problem) String() string {
	return failure.Text(p.Variable+": "+p.Message, p.Rule)
}

// Error reports every problem Load found, so an operator fixes them all in
// one pass instead of one per restart.
type Error struct {
	// Problems lists unknown variables first, sorted by name, then the
	// problems with known variables in section order.
	Problems []Problem
}

// Error joins the problems one per line.
func (e *Error) Error() string {
	lines := make([]string, len(e.Problems))
	for i, p := range e.Problems {
		lines[i] = p.String()
	}
	return strings.Join(lines, "\n")
}
