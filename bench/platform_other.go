//go:build !unix

package main

import (
	"io/fs"
	"os"
)

// allocatedBytes returns fi's length: allocation is not known here.
func allocatedBytes(fi fs.FileInfo) int64 { return fi.Size() }

// peakRSS is not measured on this platform.
func peakRSS(*os.ProcessState) int64 { return 0 }

// selfPeakRSS is not measured on this platform.
func selfPeakRSS() int64 { return 0 }

// selfCPU returns 0: CPU time is measured on unix only.
func selfCPU() int64 { return 0 }
