//go:build !(linux || darwin || freebsd || openbsd || netbsd || dragonfly)

package vfs

import (
	"context"
	"hash/maphash"
	"os"
	"sync"
)

// dirLocks stand in for flock where the platform has none: they exclude
// the writers of one process only, by the directory's name.
var (
	dirLocks    [64]sync.Mutex
	dirLockSeed = maphash.MakeSeed()
)

// lockDir takes the lock of the directory named key within this process,
// waiting while another writer has it; ctx is checked once it is held.
func lockDir(ctx context.Context, _ *os.File, key string) (unlock func(), err error) {
	m := &dirLocks[maphash.String(dirLockSeed, key)%uint64(len(dirLocks))]
	m.Lock()
	if err := ctx.Err(); err != nil {
		m.Unlock()
		return nil, err
	}
	return m.Unlock, nil
}
