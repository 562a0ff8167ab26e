//go:build unix

package runs

import (
	"io/fs"
	"syscall"
)

// linkCount returns how many names the file fi describes has, if the
// system says.
func linkCount(fi fs.FileInfo) (uint64, bool) {
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok {
		return 0, false
	}
	return uint64(st.Nlink), true
}
