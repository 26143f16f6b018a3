package poll_test

import (
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, so Until's own failure can be asserted.
type recorder struct {
	testing.TB
	failed atomic.Bool
	msg    string
}

func (r *recorder) Helper() {}
func (r *recorder) Fatalf(format string, args ...any) {
	r.failed.Store(true)
	r.msg = fmt.Sprintf(format, args...)
	panic(r)
}

// Errorf records a failure that does not end the test.
func (r *recorder) Errorf(format string, args ...any) {
	r.failed.Store(true)
	r.msg = fmt.Sprintf(format, args...)
}

// fails runs f, which is to end r's test through Fatalf, and stops the
// panic that ending it raised.
func fails(r *recorder, f func()) {
	defer func() {
		if p := recover(); p != r {
			panic(p)
		}
	}()
	f()
}

// requireFailed asserts that r failed as a wait named "never" does, with
// state as the last thing seen.
func requireFailed(t *testing.T, r *recorder, state string) {
	t.Helper()
	require.True(t, r.failed.Load())
	require.True(t, strings.HasPrefix(r.msg, "never: not so after"), r.msg)
	require.Contains(t, r.msg, "last seen: "+state)
}

func TestUntil(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsOnceTheConditionHolds", func(t *testing.T) {
		t.Parallel()
		asked := 0
		poll.Until(t, time.Second, "third time", func() (bool, string) {
			asked++
			return asked == 3, fmt.Sprint(asked)
		})
		require.Equal(t, 3, asked)
	})

	t.Run("FailsWithTheLastState", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		fails(r, func() {
			poll.Until(r, 3*poll.Interval, "never", func() (bool, string) { return false, "still 7" })
		})
		requireFailed(t, r, "still 7")
	})
}

func TestEvery(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsOnceTheConditionHoldsWithoutDescribing", func(t *testing.T) {
		t.Parallel()
		asked := 0
		poll.Every(t, time.Millisecond, time.Second, "third time", func() bool {
			asked++
			return asked == 3
		}, func() string {
			t.Error("describe asked although the condition held")
			return ""
		})
		require.Equal(t, 3, asked)
	})

	t.Run("AsksAtTheCallersPace", func(t *testing.T) {
		t.Parallel()
		asked := 0
		r := &recorder{TB: t}
		fails(r, func() {
			poll.Every(r, 100*time.Millisecond, 250*time.Millisecond, "never", func() bool {
				asked++
				return false
			}, func() string { return "" })
		})
		require.True(t, r.failed.Load())
		// Once at once, then after each interval's sleep: sleeps may run
		// long, never short.
		require.LessOrEqual(t, asked, 4)
		require.GreaterOrEqual(t, asked, 2)
	})

	t.Run("FailsWithTheDescriptionAskedOnce", func(t *testing.T) {
		t.Parallel()
		described := 0
		r := &recorder{TB: t}
		fails(r, func() {
			poll.Every(r, time.Millisecond, 20*time.Millisecond, "never", func() bool { return false }, func() string {
				described++
				return "jobs: 3 running"
			})
		})
		require.Equal(t, 1, described)
		requireFailed(t, r, "jobs: 3 running")
	})
}

func TestSoft(t *testing.T) {
	t.Parallel()

	t.Run("ReportsTrueOnceTheConditionHolds", func(t *testing.T) {
		t.Parallel()
		asked := 0
		require.True(t, poll.Soft(t, poll.Interval, time.Second, "third time", func() (bool, string) {
			asked++
			return asked == 3, fmt.Sprint(asked)
		}))
		require.Equal(t, 3, asked)
	})

	t.Run("FailsWithoutEndingTheTest", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		held := poll.Soft(r, poll.Interval, 3*poll.Interval, "never", func() (bool, string) { return false, "still 7" })
		require.False(t, held)
		requireFailed(t, r, "still 7")
	})
}
