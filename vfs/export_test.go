package vfs

import "time"

// SetHostLockWait sets how long a host change waits for its directory's
// lock, until the returned function puts the default back.
func SetHostLockWait(d time.Duration) (restore func()) {
	old := hostLockWait
	hostLockWait = d
	return func() { hostLockWait = old }
}
