package vfs

import "time"

// SetHostLockWait sets how long a host change waits for its directory's
// lock, until the returned function puts the default back.
func SetHostLockWait(d time.Duration) (restore func()) {
	old := hostLockWait
	hostLockWait = d
	return func() { hostLockWait = old }
}

// HostDirReads counts the directories h's walks read.
func HostDirReads(h *HostFS) int64 { return h.dirReads.Load() }
