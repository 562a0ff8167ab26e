//go:build !linux

package main

// growPipe does nothing where the pipe's capacity cannot be set; it
// reports 0.
func growPipe(any) int { return 0 }

// readerGone reports false: a pipe's closed reading end is learnt only
// when a write fails.
func readerGone(any) bool { return false }
