//go:build unix

package vfs

import (
	"io/fs"
	"os"
	"slices"
	"sync"
	"syscall"
)

// openReadFlags open a host file for reading without waiting: a FIFO put
// where a regular file was opens at once, and is then refused.
const openReadFlags = os.O_RDONLY | syscall.O_NONBLOCK

// openDirFlags open a host directory to list it: anything else in its
// place fails to open (ENOTDIR on every system), and is not waited on.
const openDirFlags = openReadFlags | syscall.O_DIRECTORY

// groups are the process's supplementary groups, read once.
var groups = sync.OnceValue(func() []int {
	g, _ := os.Getgroups()
	return g
})

// mayWrite reports whether this process may write the file fi describes,
// as access(2) would say from its owner and permission bits (root may
// write any): a change never replaces a file the user could not write.
func mayWrite(fi fs.FileInfo) bool {
	perm := fi.Mode().Perm()
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return perm&0o222 != 0
	}
	uid := os.Geteuid()
	switch {
	case uid == 0:
		return true
	case int(st.Uid) == uid:
		return perm&0o200 != 0
	case int(st.Gid) == os.Getegid() || slices.Contains(groups(), int(st.Gid)):
		return perm&0o020 != 0
	}
	return perm&0o002 != 0
}
