package storetest

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"sync/atomic"
	"time"
)

// HeapGrowth runs fn and returns the most the live heap grew above its
// level before fn, sampled with runtime.ReadMemStats every few
// milliseconds and once at the end. The collector runs at 1 % while fn
// does, so the garbage fn leaves between collections stays small and the
// figure is what fn holds; a test's set-up before runs at the usual pace.
func HeapGrowth(fn func()) uint64 {
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	base := ms.HeapAlloc
	var peak atomic.Uint64
	sample := func() {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		if ms.HeapAlloc > base && ms.HeapAlloc-base > peak.Load() {
			peak.Store(ms.HeapAlloc - base)
		}
	}
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				sample()
			}
		}
	}()
	fn()
	close(stop)
	<-done
	sample()
	return peak.Load()
}

// LeastHeapGrowth is the least HeapGrowth of n runs of fn, which must
// leave the same state each time (a dry run, a repeated publish): the
// garbage a run leaves between collections, collected late on a loaded
// machine, moves a single figure by a MiB or two, what fn holds does not.
func LeastHeapGrowth(n int, fn func()) uint64 {
	least := HeapGrowth(fn)
	for range n - 1 {
		least = min(least, HeapGrowth(fn))
	}
	return least
}

// Text returns a reader of n bytes of deterministic text, made as it is
// read, so a test can stream a file of any size without holding it.
func Text(n int64) io.Reader { return &text{left: n} }

type text struct {
	left, line int64
	pending    []byte
}

func (g *text) Read(b []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(b) && g.left > 0 {
		if len(g.pending) == 0 {
			g.line++
			g.pending = fmt.Appendf(g.pending[:0], "line %d: %x the quick brown fox\n", g.line, g.line*2654435761)
		}
		k := min(copy(b[n:], g.pending), int(g.left))
		g.pending = g.pending[k:]
		n += k
		g.left -= int64(k)
	}
	return n, nil
}
