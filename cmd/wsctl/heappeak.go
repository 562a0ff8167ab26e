package main

import (
	"fmt"
	"os"
	"strconv"

	"github.com/wsstore/wsstore/internal/heappeak"
)

// heapPeakEnv names a file to write, when the command ends, the largest
// heap it held (internal/heappeak: the bytes of heap objects, sampled
// every millisecond); unset, nothing is sampled.
const heapPeakEnv = "WSCTL_HEAPPEAK"

// startHeapPeak starts the sampling heapPeakEnv asks for and returns what
// ends it and writes the peak.
func startHeapPeak() func() {
	path := os.Getenv(heapPeakEnv)
	if path == "" {
		return func() {}
	}
	stop := heappeak.Start()
	return func() {
		if err := os.WriteFile(path, strconv.AppendUint(nil, stop(), 10), 0o644); err != nil {
			fmt.Fprintf(os.Stderr, "wsctl: %s: %v\n", heapPeakEnv, err)
		}
	}
}
