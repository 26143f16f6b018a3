// Package poll makes a test wait for what it checks: a condition asked
// again and again until it holds, or the test fails with the last state
// the condition reported.
//
// It replaces the hand-written "for { check; time.Sleep }" loop. It does
// not decide how long anything may take: the caller's bound is the
// assertion, and the poll interval only decides how soon a met condition
// is noticed.
package poll

import (
	"testing"
	"time"
)

// Interval is how often Until asks its condition again.
const Interval = 20 * time.Millisecond

// Until asks check every Interval until it reports done, and fails t (with
// FailNow) when within passes first, printing msg and what check said the
// last time. check runs on the test's goroutine, so it may use require.
func Until(t testing.TB, within time.Duration, msg string, check func() (done bool, state string)) {
	t.Helper()
	var state string
	if !wait(Interval, within, func() (done bool) { done, state = check(); return done }) {
		t.Fatalf("%s: not so after %v; last seen: %s", msg, within, state)
	}
}

// UntilTrue is Until for a condition with nothing to say about itself.
func UntilTrue(t testing.TB, within time.Duration, msg string, check func() bool) {
	t.Helper()
	Until(t, within, msg, func() (bool, string) { return check(), "false" })
}

// Every is Until for a condition watched at the caller's pace: check is
// asked every interval (closer than Interval, to catch a state that lasts
// milliseconds, or further apart, when asking costs a process or a scan),
// and describe only once, when within has passed, for the state to print,
// so a dear description does not slow the watch. It does not ask describe
// when check holds in time.
func Every(t testing.TB, interval, within time.Duration, msg string, check func() bool, describe func() string) {
	t.Helper()
	if !wait(interval, within, check) {
		t.Fatalf("%s: not so after %v; last seen: %s", msg, within, describe())
	}
}

// Soft is Until for a verdict among others, asked every interval: when
// within passes first it reports the failure with Errorf and returns
// false, so the test goes on to its other verdicts. It does not end the
// test; a caller that cannot go on without the condition wants Until.
func Soft(t testing.TB, interval, within time.Duration, msg string, check func() (done bool, state string)) bool {
	t.Helper()
	var state string
	if !wait(interval, within, func() (done bool) { done, state = check(); return done }) {
		t.Errorf("%s: not so after %v; last seen: %s", msg, within, state)
		return false
	}
	return true
}

// wait asks check every interval until it holds (true) or within has
// passed (false). check is asked at least once, the last time after the
// deadline.
func wait(interval, within time.Duration, check func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if check() {
			return true
		}
		if !time.Now().Before(deadline) {
			return false
		}
		time.Sleep(interval)
	}
}
