//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package replica

import "sync"

// metaLocks stand in for flock where the platform has none: they exclude
// the replicators of one process only, by the directory's name.
var metaLocks sync.Map

// lockMeta takes the lock of Litestream's local state directory dir
// within this process, without waiting; held reports another holder.
func lockMeta(dir string) (unlock func(), held bool, err error) {
	if _, loaded := metaLocks.LoadOrStore(dir, struct{}{}); loaded {
		return nil, true, nil
	}
	return func() { metaLocks.Delete(dir) }, false, nil
}
