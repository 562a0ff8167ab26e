// Package mkdirs tells which directories making a path would create, so
// a command that fails after making them removes them again.
package mkdirs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
)

// Missing returns p and those of its parents that do not exist,
// outermost first: the directories os.MkdirAll(p) would make.
func Missing(p string) []string {
	var missing []string
	for {
		if _, err := os.Lstat(p); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		missing = append(missing, p)
		up := filepath.Dir(p)
		if up == p {
			break
		}
		p = up
	}
	slices.Reverse(missing)
	return missing
}

// RemoveEmpty removes the directories Missing listed, innermost first,
// each only while it is empty: it stops at the first that holds anything
// (another program put a file there meanwhile), leaving it and those
// outside it. One already gone is passed over.
func RemoveEmpty(made []string) {
	for _, d := range slices.Backward(made) {
		if err := os.Remove(d); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return
		}
	}
}
