//go:build unix

package index

import (
	"errors"
	"io/fs"
	"os"
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

// readable reports whether this process may read the database file: false
// for a file whose permissions refuse this user. It asks access(2) rather
// than opening the file, since closing a descriptor of it would drop the
// locks SQLite holds on it for this process's other connections.
func readable(path string) bool {
	const rOK = 4 // R_OK
	return !errors.Is(syscall.Access(path, rOK), fs.ErrPermission)
}

// sqliteTempDir returns the directory SQLite keeps its temporary files
// in: the first of $SQLITE_TMPDIR, $TMPDIR, /var/tmp, /usr/tmp and /tmp
// that is a directory this process may write, else the working directory.
func sqliteTempDir() string {
	const wxOK = 3 // W_OK | X_OK
	for _, d := range []string{os.Getenv("SQLITE_TMPDIR"), os.Getenv("TMPDIR"), "/var/tmp", "/usr/tmp", "/tmp"} {
		if fi, err := os.Stat(d); d != "" && err == nil && fi.IsDir() && syscall.Access(d, wxOK) == nil {
			return d
		}
	}
	return "."
}
