//go:build !unix

package vfs

import (
	"io/fs"
	"os"
)

// openReadFlags open a host file for reading.
const openReadFlags = os.O_RDONLY

// openDirFlags open a host directory to list it.
const openDirFlags = os.O_RDONLY

// mayWrite reports whether the file fi describes may be written: not
// marked read-only.
func mayWrite(fi fs.FileInfo) bool { return fi.Mode().Perm()&0o200 != 0 }
