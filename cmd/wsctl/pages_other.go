//go:build !linux

package main

// dropCodePages does nothing where the resident set of the executable's
// pages is not managed (see the Linux version).
func dropCodePages() {}
