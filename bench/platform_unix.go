//go:build unix

package main

import (
	"io/fs"
	"os"
	"runtime"
	"syscall"
)

// allocatedBytes returns the bytes the file system allocated to fi
// (st_blocks × 512), or its length where that is unknown.
func allocatedBytes(fi fs.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return int64(st.Blocks) * 512
	}
	return fi.Size()
}

// peakRSS returns the peak resident set of a finished child process in
// bytes: wait4's ru_maxrss, which is the larger of the child's own peak and
// that of any descendant it waited for (git, for the git baseline).
func peakRSS(ps *os.ProcessState) int64 {
	ru, ok := ps.SysUsage().(*syscall.Rusage)
	if !ok {
		return 0
	}
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(ru.Maxrss) // bytes there
	}
	return int64(ru.Maxrss) << 10 // KiB on Linux and the BSDs
}

// selfPeakRSS returns the peak resident set so far of this process or of
// any child it has waited for, in bytes.
func selfPeakRSS() int64 {
	var self, children syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &self) != nil || syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children) != nil {
		return 0
	}
	n := max(self.Maxrss, children.Maxrss)
	if runtime.GOOS == "darwin" || runtime.GOOS == "ios" {
		return int64(n)
	}
	return int64(n) << 10
}

// selfCPU returns the CPU time (user plus system) this process has used so
// far, in nanoseconds.
func selfCPU() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
