//go:build !linux

package rss

import "os/exec"

func peak(cmd *exec.Cmd) (int64, error) {
	return 0, ErrUnsupported
}
