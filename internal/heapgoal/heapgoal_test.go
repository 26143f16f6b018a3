package heapgoal_test

import (
	"fmt"
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/mailfathom/mailfathom/internal/heapgoal"
	"github.com/mailfathom/mailfathom/internal/testharness/poll"
)

func TestPercent(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	require.Equal(t, 1200, heapgoal.Percent(4*mib, 4*mib, 48*mib), "a small live heap gets the whole headroom")
	require.Equal(t, 1000, heapgoal.Percent(4*mib, 5*mib, 50*mib), "stacks and globals count")
	require.Equal(t, 100, heapgoal.Percent(48*mib, 48*mib, 48*mib))
	require.Equal(t, 100, heapgoal.Percent(500*mib, 500*mib, 48*mib), "never below twice the live heap")
	require.Equal(t, 800, heapgoal.Percent(0, 0, 32*mib), "the runtime's minimum goal, scaled, stays within the headroom")
	require.Equal(t, 825, heapgoal.Percent(mib, 2*mib, 32*mib), "the same for a tiny live heap")
}

// TestKeepFollowsTheLiveHeap checks against the runtime's own heap goal
// that, after collections, the goal is the live heap plus the headroom, as
// the live heap grows and shrinks. Not parallel: it owns the process's GC
// percent.
func TestKeepFollowsTheLiveHeap(t *testing.T) {
	const mib = 1 << 20
	const headroom = 32 * mib
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	k := heapgoal.Keep(headroom)
	defer k.Stop()

	sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/gc/heap/goal:bytes"}}
	// settled collects until the finalizer has re-targeted the goal for
	// the current live heap as want expects, and returns live and goal.
	settled := func(what string, want func(live, goal float64) bool) (live, goal uint64) {
		t.Helper()
		poll.Until(t, 5*time.Second, what, func() (bool, string) {
			runtime.GC()
			time.Sleep(time.Millisecond) // the finalizer goroutine adjusts
			runtime.GC()
			metrics.Read(sample)
			live, goal = sample[0].Value.Uint64(), sample[1].Value.Uint64()
			return want(float64(live), float64(goal)), fmt.Sprintf("live heap %d MiB, goal %d MiB", live/mib, goal/mib)
		})
		return live, goal
	}
	plusHeadroom := func(live, goal float64) bool { return math.Abs(goal-(live+headroom)) <= headroom*0.2 }

	live, goal := settled("small live heap: goal is live + headroom", plusHeadroom)
	require.InDelta(t, float64(live+headroom), float64(goal), headroom*0.2, "small live heap: goal is live + headroom")

	big := make([][]byte, 0, 96)
	for range 96 {
		big = append(big, make([]byte, mib))
	}
	live, goal = settled("large live heap: goal is twice the live heap", func(live, goal float64) bool {
		return math.Abs(goal-2*live) <= live*0.2
	})
	require.GreaterOrEqual(t, live, uint64(96*mib))
	require.InDelta(t, float64(2*live), float64(goal), float64(live)*0.2, "large live heap: goal is twice the live heap")
	runtime.KeepAlive(big)
	big = nil

	live, goal = settled("the goal follows the live heap down", plusHeadroom)
	require.Less(t, live, uint64(64*mib))
	require.InDelta(t, float64(live+headroom), float64(goal), headroom*0.2, "the goal follows the live heap down")
}
