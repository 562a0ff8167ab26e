package main

import (
	"os"
	"runtime/debug"
)

// streamingGCPercent is the GOGC of the commands that stream a file
// through the store (actor upload and download, export, import). They
// hold a few multi-megabyte buffers for their whole run (a chunk read
// ahead, its compressed form, the encoder's window) and make little
// garbage, so the default of 100, which lets the heap grow to twice what
// is live before it collects, would spend a third of their memory on
// headroom; at 25 a collection comes every few megabytes of garbage and
// costs little, as nearly all that is live holds no pointers.
const streamingGCPercent = 25

// streaming sets the GOGC of a streaming command, unless the environment
// sets one, and returns the function that restores the previous value.
func streaming() (restore func()) {
	if os.Getenv("GOGC") != "" {
		return func() {}
	}
	old := debug.SetGCPercent(streamingGCPercent)
	return func() { debug.SetGCPercent(old) }
}

// softMemoryLimit sets limit as the Go runtime's soft memory limit
// (debug.SetMemoryLimit), unless the environment sets GOMEMLIMIT or limit
// is 0, and returns the function that restores the previous one. batch
// and serve run under it: a request that streams a large file makes
// garbage at the rate it reads, and the limit has it collected before
// the heap doubles past what is live, at no cost while the heap stays
// well below it.
func softMemoryLimit(limit int64) (restore func()) {
	if _, set := os.LookupEnv("GOMEMLIMIT"); set || limit <= 0 {
		return func() {}
	}
	old := debug.SetMemoryLimit(limit)
	return func() { debug.SetMemoryLimit(old) }
}
