package rss

import (
	"errors"
	"os/exec"
)

// ErrUnsupported: the platform offers no way to read a child's peak
// resident set.
var ErrUnsupported = errors.New("rss: peak resident set size is not available on this platform")

// Peak starts cmd, waits for it to exit and returns its peak resident set
// size in bytes. The error is the one Start or Wait returned (an
// *exec.ExitError for a non-zero exit status, with the peak still
// reported), or ErrUnsupported off Linux.
func Peak(cmd *exec.Cmd) (int64, error) { return peak(cmd) }
