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
		func() {
			defer func() {
				if p := recover(); p != r {
					panic(p)
				}
			}()
			poll.Until(r, 3*poll.Interval, "never", func() (bool, string) { return false, "still 7" })
		}()
		require.True(t, r.failed.Load())
		require.True(t, strings.HasPrefix(r.msg, "never: not so after"), r.msg)
		require.Contains(t, r.msg, "last seen: still 7")
	})
}
