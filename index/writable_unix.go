//go:build unix

package index

import (
	"path/filepath"
	"syscall"
)

// writable reports whether this process may write the database file and
// create files beside it (the write-ahead log and its index): false on a
// read-only file system, or for a file or directory whose permissions
// refuse this user (root passes those unless the file system itself is
// read-only).
func writable(path string) bool {
	const wOK = 2 // W_OK
	return syscall.Access(path, wOK) == nil && syscall.Access(filepath.Dir(path), wOK) == nil
}
