//go:build linux || darwin || freebsd || openbsd || netbsd || dragonfly

package replica

import (
	"errors"
	"os"
	"syscall"
)

// lockMeta takes the exclusive advisory lock (flock) of Litestream's
// local state directory dir without waiting, so that one Replicator, in
// any process, ships a database at a time. held reports another holder.
// The lock goes with the process, so a killed replicator leaves none.
func lockMeta(dir string) (unlock func(), held bool, err error) {
	d, err := os.Open(dir)
	if err != nil {
		return nil, false, err
	}
	if err := syscall.Flock(int(d.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		d.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, true, nil
		}
		return nil, false, err
	}
	return func() { d.Close() }, false, nil
}
