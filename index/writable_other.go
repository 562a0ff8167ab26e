//go:build !unix

package index

import "os"

// writable reports true: where access(2) is missing, a read-only store is
// found when SQLite refuses to write it.
func writable(string) bool { return true }

// readable reports true: where access(2) is missing, a store this user
// may not read is found when SQLite cannot open it.
func readable(string) bool { return true }

// sqliteTempDir returns the directory SQLite keeps its temporary files in.
func sqliteTempDir() string { return os.TempDir() }
