// Package heappeak samples a process's heap while it works and reports the
// largest it saw: the bytes of heap objects (live ones and garbage not yet
// swept, runtime/metrics' /memory/classes/heap/objects:bytes). An
// operation holds its buffers for at least as long as it takes to fill
// them, so a sampling every millisecond sees one that holds tens of
// megabytes.
package heappeak

import (
	"runtime/metrics"
	"sync"
	"time"
)

// Every is how often Start samples.
const Every = time.Millisecond

const objects = "/memory/classes/heap/objects:bytes"

// Start samples the heap every Every until the returned func is called,
// which samples it once more and returns the largest sample, in bytes
// (again, if called again).
func Start() (stop func() uint64) {
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: objects}}
		var most uint64
		t := time.NewTicker(Every)
		defer t.Stop()
		sample := func() {
			metrics.Read(s)
			if s[0].Value.Kind() == metrics.KindUint64 {
				most = max(most, s[0].Value.Uint64())
			}
		}
		for {
			sample()
			select {
			case <-done:
				sample() // what is held when stop is called counts too
				peak <- most
				return
			case <-t.C:
			}
		}
	}()
	var once sync.Once
	var most uint64
	return func() uint64 {
		once.Do(func() {
			close(done)
			most = <-peak
		})
		return most
	}
}
