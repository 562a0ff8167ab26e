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
