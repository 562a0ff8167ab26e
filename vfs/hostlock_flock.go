//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package vfs

import (
	"context"
	"errors"
	"os"
	"syscall"
	"time"
)

// lockDir takes the exclusive advisory lock (flock) of the open directory
// d (key, its full name, is for platforms without flock), waiting while
// another holder has it, until ctx ends. Closing d releases it. flock
// locks belong to an open file description, so two mounts of one
// directory in one process exclude each other as two processes do.
func lockDir(ctx context.Context, d *os.File, key string) (unlock func(), err error) {
	fd := int(d.Fd())
	for wait := 100 * time.Microsecond; ; wait = min(2*wait, 20*time.Millisecond) {
		err := syscall.Flock(fd, syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-t.C:
		}
	}
}
