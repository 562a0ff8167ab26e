package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/vfs"
)

// gitHeaders returns diffs with git's file headers: /dev/null stands for
// the missing side of an added or deleted file ("--- /dev/null" where the
// store writes "--- a/PATH"). Both ways in, wsctl diff and batch's diff,
// show diffs through it, so a host sees the same text either way.
func gitHeaders(diffs []checkpoint.FileDiff) []checkpoint.FileDiff {
	out := make([]checkpoint.FileDiff, len(diffs))
	for i, d := range diffs {
		switch d.Op {
		case vfs.Added:
			d.Unified = strings.Replace(d.Unified, "--- a/"+d.Path+"\n", "--- /dev/null\n", 1)
		case vfs.Deleted:
			d.Unified = strings.Replace(d.Unified, "+++ b/"+d.Path+"\n", "+++ /dev/null\n", 1)
		}
		out[i] = d
	}
	return out
}

// writeUnified prints file diffs (through gitHeaders) as unified text, the
// way git diff does; files without a text diff get one line saying why.
func writeUnified(w io.Writer, diffs []checkpoint.FileDiff) error {
	for _, d := range gitHeaders(diffs) {
		var err error
		switch {
		case d.Unified != "":
			_, err = io.WriteString(w, d.Unified)
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
