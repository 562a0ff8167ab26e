package storetest

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// HeapGrowth runs fn and returns the most the live heap grew above its
// level before fn. The live heap is what a collection marked
// (runtime/metrics /gc/heap/live:bytes), read every millisecond while fn
// runs and until a collection forced when it returns has ended. The
// collector runs at 1 % while fn does, so collections follow each other
// closely. A collection counts as live what fn allocates while it marks,
// garbage or not; the next one counts only what fn still holds. So while
// fn runs a growth counts as far as two collections in a row saw it, and
// after, as far as the forced one did: what fn held across collections
// and what it returned count, the garbage it dropped does not, however
// late a loaded machine collects it.
func HeapGrowth(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	// Twice: the first moves what sync.Pools hold to their victim caches,
	// the second frees it.
	runtime.GC()
	runtime.GC()
	baseCycle, base := gcState()
	var peak uint64
	record := func(live uint64) {
		if live > base {
			peak = max(peak, live-base)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(time.Millisecond)
		defer tick.Stop()
		cycle, last := baseCycle, base
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			// Counted only if the collection before counted it too: what
			// fn allocated while one collection marked is gone from the
			// next, what it holds is in both.
			if c, live := gcState(); c != cycle {
				record(min(last, live))
				cycle, last = c, live
			}
		}
	}()
	fn()
	// A collection under way when fn returned is sampled as it ends, before
	// the forced one does: it marked what fn held. The forced one marks
	// what fn returned, with fn no longer allocating.
	runtime.GC()
	close(stop)
	<-done
	_, live := gcState()
	record(live)
	return peak
}

// gcState returns how many collections have ended and the bytes of heap
// the last one marked live.
func gcState() (cycles, live uint64) {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64()
}

// LeastHeapGrowth is the least HeapGrowth of n runs of fn, which must
// leave the same state each time (a dry run, a repeated publish): what fn
// holds is in every run's figure, the garbage it allocates while a
// collection is marking in few.
func LeastHeapGrowth(n int, fn func()) uint64 {
	least := HeapGrowth(fn)
	for range n - 1 {
		least = min(least, HeapGrowth(fn))
	}
	return least
}
