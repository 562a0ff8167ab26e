package main

import (
	"fmt"
	"io"

	"github.com/wsstore/wsstore/checkpoint"
)

// writeUnified prints file diffs as unified text, the
// way git diff does; files without a text diff get one line saying why.
func writeUnified(w io.Writer, diffs []checkpoint.FileDiff) error {
	for _, d := range diffs {
		var err error
		switch {
		case d.Unified != "":
			if _, err = io.WriteString(w, d.Unified); err == nil && d.Truncated {
				_, err = fmt.Fprintf(w, "(%s: %d hunk(s) left out at the response limit)\n", d.Path, d.OmittedHunks)
			}
		case d.Truncated && d.OmittedHunks > 0:
			_, err = fmt.Fprintf(w, "File %s %s (%s -> %s): diff left out at the response limit (%d hunk(s))\n", d.Path, d.Op, humanBytes(d.OldSize), humanBytes(d.NewSize), d.OmittedHunks)
		case d.Truncated:
			_, err = fmt.Fprintf(w, "File %s %s (%s -> %s): diff left out at the response limit\n", d.Path, d.Op, humanBytes(d.OldSize), humanBytes(d.NewSize))
		case d.Binary:
			_, err = fmt.Fprintf(w, "Binary file %s %s (%s -> %s)\n", d.Path, d.Op, humanBytes(d.OldSize), humanBytes(d.NewSize))
		case d.OldSize == 0 && d.NewSize == 0:
			_, err = fmt.Fprintf(w, "Empty file %s %s\n", d.Path, d.Op)
		case d.TooLarge:
			_, err = fmt.Fprintf(w, "File %s %s (%s -> %s): too large for a text diff\n", d.Path, d.Op, humanBytes(d.OldSize), humanBytes(d.NewSize))
		default:
			_, err = fmt.Fprintf(w, "File %s %s (%s -> %s)\n", d.Path, d.Op, humanBytes(d.OldSize), humanBytes(d.NewSize))
		}
		if err != nil {
			return err
		}
	}
	return nil
}
