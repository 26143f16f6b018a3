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
	deadline := time.Now().Add(within)
	for {
		done, state := check()
		if done {
			return
		}
		if !time.Now().Before(deadline) {
			t.Fatalf("%s: not so after %v; last seen: %s", msg, within, state)
		}
		time.Sleep(Interval)
	}
}

// UntilTrue is Until for a condition with nothing to say about itself.
func UntilTrue(t testing.TB, within time.Duration, msg string, check func() bool) {
	t.Helper()
	Until(t, within, msg, func() (bool, string) { return check(), "false" })
}
