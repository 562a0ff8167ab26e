package main

import (
	"errors"
	"syscall"
)

// errNoData is ERROR_NO_DATA, "The pipe is being closed": Windows's
// answer to a write into a pipe whose reading end is closed.
const errNoData = syscall.Errno(232)

// pipeClosed reports whether err is a write into a pipe whose reader
// closed its end.
func pipeClosed(err error) bool {
	return errors.Is(err, errNoData) || errors.Is(err, syscall.ERROR_BROKEN_PIPE) || errors.Is(err, syscall.EPIPE)
}
