package wire

import (
	"strconv"
	"strings"
	"time"
)

// This file reads the answers a server gives when it refuses work for a
// while rather than for good: the response codes of RFC 5530 §3 that say
// so, the THROTTLED code some servers add, and the texts of the providers
// that say it in words only. What it keeps of an answer is a fixed reason
// and the delay the server suggested; the text itself is read, matched and
// dropped, because it is the server's and may carry anything.

// The throttling reasons, one per form a server says it in. They are fixed
// words, safe for errors, logs and metric labels.
const (
	// ThrottleUnavailable: [UNAVAILABLE], a subsystem is down for now
	// (RFC 5530 §3).
	ThrottleUnavailable = "Unavailable"
	// ThrottleLimit: [LIMIT], an implementation limit such as the
	// number of connections (RFC 5530 §3).
	ThrottleLimit = "Limit"
	// ThrottleOverQuota: [OVERQUOTA], a quota of the account is spent
	// (RFC 5530 §3).
	ThrottleOverQuota = "OverQuota"
	// ThrottleInUse: [INUSE], another session holds what the command
	// needs (RFC 5530 §3).
	ThrottleInUse = "InUse"
	// ThrottleThrottled: [THROTTLED].
	ThrottleThrottled = "Throttled"
	// ThrottleRequestThrottled: Microsoft 365's "Request is throttled",
	// usually with "Suggested Backoff Time: N milliseconds".
	ThrottleRequestThrottled = "RequestThrottled"
	// ThrottleBandwidthExceeded: Gmail's "Account exceeded command or
	// bandwidth limits".
	ThrottleBandwidthExceeded = "BandwidthExceeded"
	// ThrottleTooManyConnections: Gmail's "Too many simultaneous
	// connections".
	ThrottleTooManyConnections = "TooManyConnections"
)

// Throttle is what a refusal says about being asked again later. The zero
// value is an answer that is not a throttling one.
type Throttle struct {
	// Reason is one of the Throttle* reasons; "" when the answer does not
	// throttle.
	Reason string
	// Delay is the wait the server suggested, 0 when it suggested none;
	// never more than MaxSuggestedDelay.
	Delay time.Duration
}

// Throttles reports whether t is a throttling answer.
func (t Throttle) Throttles() bool { return t.Reason != "" }

// MaxSuggestedDelay bounds the delay a server can suggest: a larger
// number is read as this, so no answer can park an account for longer
// than a day.
const MaxSuggestedDelay = 24 * time.Hour

// maxThrottleText bounds the part of a response text Throttling reads: the
// texts it recognizes are short and come first.
const maxThrottleText = 512

// codeReasons maps the response codes that throttle to their reason.
var codeReasons = map[string]string{
	"UNAVAILABLE": ThrottleUnavailable,
	"LIMIT":       ThrottleLimit,
	"OVERQUOTA":   ThrottleOverQuota,
	"INUSE":       ThrottleInUse,
	"THROTTLED":   ThrottleThrottled,
}

// textReasons are the phrases that throttle in words, lower-cased, in the
// order they are tried.
var textReasons = []struct{ phrase, reason string }{
	{"account exceeded command or bandwidth limits", ThrottleBandwidthExceeded},
	{"too many simultaneous connections", ThrottleTooManyConnections},
	{"request is throttled", ThrottleRequestThrottled},
}

// suggestedBackoff introduces Microsoft 365's suggested delay.
const suggestedBackoff = "suggested backoff time:"

// Throttling reads a status response — its status (NO, BAD or BYE; any
// other status never throttles), its response code, upper-cased, and its
// text — for whether the server refuses work for a while, and why. A code
// of RFC 5530 that says so wins over the text; the text is read only as
// far as maxThrottleText and is not kept. A text that suggests a delay
// throttles whatever else it says.
func Throttling(status, code, text string) Throttle {
	switch status {
	case "NO", "BAD", "BYE":
	default:
		return Throttle{}
	}
	if len(text) > maxThrottleText {
		text = text[:maxThrottleText]
	}
	text = strings.ToLower(text)
	t := Throttle{Reason: codeReasons[code], Delay: suggestedDelay(text)}
	if t.Reason == "" {
		for _, r := range textReasons {
			if strings.Contains(text, r.phrase) {
				t.Reason = r.reason
				break
			}
		}
	}
	if t.Reason == "" && t.Delay > 0 {
		t.Reason = ThrottleRequestThrottled
	}
	return t
}

// suggestedDelay reads "Suggested Backoff Time: N milliseconds" from text,
// lower-cased; 0 when it has none.
func suggestedDelay(text string) time.Duration {
	_, rest, ok := strings.Cut(text, suggestedBackoff)
	if !ok {
		return 0
	}
	rest = strings.TrimLeft(rest, " ")
	end := 0
	for end < len(rest) && end < 12 && rest[end] >= '0' && rest[end] <= '9' {
		end++
	}
	if end == 0 {
		return 0
	}
	n, err := strconv.ParseInt(rest[:end], 10, 64)
	if err != nil {
		return 0
	}
	unit := time.Millisecond
	if after := strings.TrimLeft(rest[end:], " "); strings.HasPrefix(after, "sec") {
		unit = time.Second
	}
	if n >= int64(MaxSuggestedDelay/unit) {
		return MaxSuggestedDelay
	}
	return time.Duration(n) * unit
}

// LineThrottle reads one status response line, without its line ending —
// "* BYE [ALERT] text", "A1 NO [UNAVAILABLE] text" — as Throttling does.
// A line that is not a status response does not throttle.
func LineThrottle(line string) Throttle {
	_, rest, ok := strings.Cut(line, " ")
	if !ok {
		return Throttle{}
	}
	status, rest, _ := strings.Cut(rest, " ")
	status = strings.ToUpper(status)
	code := ""
	if strings.HasPrefix(rest, "[") {
		end := strings.IndexByte(rest, ']')
		if end < 0 {
			return Throttling(status, "", "")
		}
		code, _, _ = strings.Cut(rest[1:end], " ")
		code = strings.ToUpper(code)
		rest = strings.TrimPrefix(rest[end+1:], " ")
	}
	return Throttling(status, code, rest)
}
