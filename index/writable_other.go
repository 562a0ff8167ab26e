//go:build !unix

package index

// writable reports true: where access(2) is missing, a read-only store is
// found when SQLite refuses to write it.
func writable(string) bool { return true }
