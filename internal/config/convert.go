package config

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/mailfathom/mailfathom/internal/secret"
)

// converter turns raw bound strings into typed values, collecting every
// problem instead of stopping at the first. No message it produces contains
// the raw value it was given, except a suggestion naming a valid choice.
type converter struct {
	problems []Problem
	// set holds the MAILFATHOM_ variables present with a non-blank value.
	set map[string]bool
	now time.Time
	// interpretation is SECRET_INTERPRETATION_MODE, converted before the
	// accounts it governs.
	interpretation InterpretationMode
}

func (c *converter) add(variable, format string, args ...any) {
	c.problems = append(c.problems, Problem{Variable: variable, Message: fmt.Sprintf(format, args...)})
}

func (c *converter) addRule(variable, rule, format string, args ...any) {
	c.problems = append(c.problems, Problem{Variable: variable, Message: fmt.Sprintf(format, args...), Rule: rule})
}

// isSet reports whether the operator set variable to a non-blank value, as
// opposed to it being unset, blank, or filled from its default.
func (c *converter) isSet(variable string) bool { return c.set[variable] }

func (c *converter) integer(variable, raw string, lo, hi int) int {
	n, err := strconv.Atoi(raw)
	if err != nil || n < lo || n > hi {
		c.add(variable, "must be a whole number from %d to %d", lo, hi)
		return 0
	}
	return n
}

func (c *converter) integer64(variable, raw string, lo, hi int64) int64 {
	n, err := strconv.ParseInt(raw, 10, 64)
	if err != nil || n < lo || n > hi {
		c.add(variable, "must be a whole number from %d to %d", lo, hi)
		return 0
	}
	return n
}

func (c *converter) duration(variable, raw string, lo, hi time.Duration) time.Duration {
	d, err := time.ParseDuration(raw)
	if err != nil {
		c.add(variable, "must be a Go duration such as 30s, 5m or 1h30m, from %s to %s", formatDuration(lo), formatDuration(hi))
		return 0
	}
	if d < lo || d > hi {
		c.add(variable, "must be from %s to %s", formatDuration(lo), formatDuration(hi))
		return 0
	}
	return d
}

func (c *converter) boolean(variable, raw string) bool {
	b, err := strconv.ParseBool(raw)
	if err != nil {
		c.add(variable, "must be true or false")
		return false
	}
	return b
}

// reference parses an optional secret reference; blank means none.
func (c *converter) reference(variable, raw string) secret.Reference {
	if raw == "" {
		return secret.Reference{}
	}
	ref, err := secret.ParseReference(raw)
	if err != nil {
		// The secret package's reasons never contain the value.
		reason := err.Error()
		var se *secret.Error
		if errors.As(err, &se) {
			reason = se.Reason
		}
		c.add(variable, "is not a valid secret reference (<scheme>:<target>): %s", reason)
		return secret.Reference{}
	}
	return ref
}

// enum matches raw exactly against names. On a mismatch the message lists
// the names and, when raw differs from one only by case, suggests it.
func enum[T ~string](c *converter, variable, raw string, names []T) (T, bool) {
	return enumIn(c, variable, "", raw, names)
}

// enumIn is enum with a context ("Account 'primary': ") leading the message.
func enumIn[T ~string](c *converter, variable, context, raw string, names []T) (T, bool) {
	for _, n := range names {
		if string(n) == raw {
			return n, true
		}
	}
	msg := "must be one of " + joinNames(names) + " (names are case-sensitive)"
	for _, n := range names {
		if strings.EqualFold(string(n), raw) {
			msg += "; did you mean " + string(n) + "?"
			break
		}
	}
	c.add(variable, "%s%s", context, msg)
	return "", false
}

func joinNames[T ~string](names []T) string {
	parts := make([]string, len(names))
	for i, n := range names {
		parts[i] = string(n)
	}
	return strings.Join(parts, ", ")
}

// formatDuration renders d without trailing zero units: 24h, 2m, 1h30m.
func formatDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

// hasControl reports whether s contains a control character.
func hasControl(s string) bool {
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return true
		}
	}
	return false
}
