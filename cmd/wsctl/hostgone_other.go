//go:build !windows

package main

import (
	"errors"
	"syscall"
)

// pipeClosed reports whether err is a write into a pipe whose reader
// closed its end (EPIPE).
func pipeClosed(err error) bool { return errors.Is(err, syscall.EPIPE) }
