package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/vfs"
)

// writeUnified prints file diffs as unified text, the way git diff does:
// /dev/null stands for the missing side of an added or deleted file, and
// files without a text diff get one line saying why.
func writeUnified(w io.Writer, diffs []checkpoint.FileDiff) error {
	for _, d := range diffs {
		var err error
		switch {
		case d.Unified != "":
			u := d.Unified
			switch d.Op {
			case vfs.Added:
				u = strings.Replace(u, "--- a/"+d.Path+"\n", "--- /dev/null\n", 1)
			case vfs.Deleted:
				u = strings.Replace(u, "+++ b/"+d.Path+"\n", "+++ /dev/null\n", 1)
			}
			_, err = io.WriteString(w, u)
		case d.Binary:
			_, err = fmt.Fprintf(w, "Binary file %s %s (%s -> %s)\n", d.Path, d.Op, humanBytes(d.OldSize), humanBytes(d.NewSize))
		case d.OldSize == 0 && d.NewSize == 0:
			_, err = fmt.Fprintf(w, "Empty file %s %s\n", d.Path, d.Op)
		default:
			_, err = fmt.Fprintf(w, "File %s %s (%s -> %s): too large for a text diff\n", d.Path, d.Op, humanBytes(d.OldSize), humanBytes(d.NewSize))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
