package main

import (
	"os"
	"runtime/metrics"
	"strconv"
	"time"
)

// heapPeakEnv names a file to write, when the command ends, the largest
// heap it held: the bytes of heap objects (live ones and garbage not yet
// swept), sampled every heapPeakEvery; unset, nothing is sampled.
const heapPeakEnv = "WSCTL_HEAPPEAK"

// heapPeakEvery is how often the heap is sampled. An operation holds its
// buffers for at least as long as it takes to fill them, so one holding
// tens of megabytes is seen.
const heapPeakEvery = time.Millisecond

// heapObjects is the runtime/metrics name sampled.
const heapObjects = "/memory/classes/heap/objects:bytes"

// startHeapPeak starts the sampling heapPeakEnv asks for and returns what
// ends it and writes the peak.
func startHeapPeak() func() {
	path := os.Getenv(heapPeakEnv)
	if path == "" {
		return func() {}
	}
	done, peak := make(chan struct{}), make(chan uint64)
	go func() {
		s := []metrics.Sample{{Name: heapObjects}}
		var most uint64
		t := time.NewTicker(heapPeakEvery)
		defer t.Stop()
		for {
			metrics.Read(s)
			if s[0].Value.Kind() == metrics.KindUint64 {
				most = max(most, s[0].Value.Uint64())
			}
			select {
			case <-done:
				peak <- most
				return
			case <-t.C:
			}
		}
	}()
	return func() {
		close(done)
		_ = os.WriteFile(path, strconv.AppendUint(nil, <-peak, 10), 0o644)
	}
}
