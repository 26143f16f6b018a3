// Package heapgoal keeps the garbage collector's heap goal at the live heap
// plus a fixed headroom.
//
// Go's default goal is a multiple of the live heap (GOGC). A service whose
// live heap is small collects often under the default, and a higher GOGC
// that cures it multiplies everything the process keeps for as long as it
// runs: with GOGC=400 every kilobyte kept per configured account costs five
// of resident memory. A fixed headroom costs the same memory whatever is
// kept, so the garbage a synchronization produces is collected about as
// often as under a high GOGC while the account list adds only what it
// keeps.
//
// The package adjusts the runtime's GC percent after each collection; it
// sets no memory limit (GOMEMLIMIT still applies) and does nothing a
// caller did not start.
package heapgoal

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync/atomic"
)

const (
	// minPercent keeps the goal at least twice the live heap, Go's own
	// default, however large the live heap grows.
	minPercent = 100
	// maxPercent bounds the percent while nothing has been measured.
	maxPercent = 100_000
)

// runtimeHeapMinimum is the runtime's smallest heap goal at GOGC=100; it
// scales with the percent (the GC guide: "4 MiB × GOGC/100").
const runtimeHeapMinimum = 4 << 20

// Percent returns the GC percent whose goal is the live heap plus
// headroom, within [minPercent, maxPercent]. The runtime applies the
// percent to the live heap plus the stacks and globals it scans
// (scanned), and never sets a goal below runtimeHeapMinimum scaled by the
// percent, so both bound it.
func Percent(live, scanned, headroom uint64) int {
	p := uint64(maxPercent)
	if scanned > 0 {
		p = headroom * 100 / scanned
	}
	p = min(p, (live+headroom)*100/runtimeHeapMinimum)
	return int(min(max(p, minPercent), maxPercent))
}

// Keeper re-targets the heap goal after every collection until stopped.
type Keeper struct {
	headroom uint64
	stopped  atomic.Bool
	sample   []metrics.Sample
}

// Keep sets the heap goal to the live heap plus headroom bytes now and
// after every garbage collection, until Stop. Only one Keeper should run in
// a process; a second one would fight the first over the GC percent.
func Keep(headroom uint64) *Keeper {
	k := &Keeper{headroom: headroom, sample: []metrics.Sample{
		{Name: "/gc/heap/live:bytes"}, {Name: "/gc/scan/globals:bytes"}, {Name: "/gc/scan/stack:bytes"},
	}}
	k.adjust()
	k.arm()
	return k
}

// Stop ends the adjustments, leaving the GC percent as last set.
func (k *Keeper) Stop() { k.stopped.Store(true) }

// sentinel is an object whose finalizer runs after the collection that
// found it unreachable. It holds a pointer so the tiny allocator never
// combines it with other objects, which would delay its finalizer.
type sentinel struct{ k *Keeper }

// arm allocates a sentinel and drops it: the next collection finds it
// unreachable, and its finalizer adjusts the goal and arms the next one.
func (k *Keeper) arm() {
	s := &sentinel{k: k}
	runtime.SetFinalizer(s, func(s *sentinel) {
		if s.k.stopped.Load() {
			return
		}
		s.k.adjust()
		s.k.arm()
	})
}

// adjust runs on the finalizer goroutine, one at a time.
func (k *Keeper) adjust() {
	metrics.Read(k.sample)
	var v [3]uint64 // live heap, globals, stacks
	for i, s := range k.sample {
		if s.Value.Kind() == metrics.KindUint64 {
			v[i] = s.Value.Uint64()
		}
	}
	debug.SetGCPercent(Percent(v[0], v[0]+v[1]+v[2], k.headroom))
}
