package main

import (
	"fmt"
	"io"
	"strings"
)

// progress draws a one-line bar, redrawn in place with '\r', on standard
// error while long work runs, when standard error is a terminal. It never
// draws on standard output, so that holds only the result (text or
// --json), terminal or not.
type progress struct {
	w    io.Writer
	on   bool
	last string // the line drawn last, to redraw only on change
	drew bool
}

// barWidth is the number of cells in the bar.
const barWidth = 24

func newProgress(g globals) *progress {
	return &progress{w: g.errOut, on: g.progress}
}

// update shows phase with done of total; with no total it shows the count,
// or that the phase is working.
// It redraws only when the visible line changes (a new phase, a new bar
// cell or percent), so a pass over a million objects costs a few hundred
// writes, not a million.
func (p *progress) update(phase string, done, total int) {
	if p == nil || !p.on {
		return
	}
	var line string
	if total > 0 {
		if done > total {
			done = total
		}
		filled := done * barWidth / total
		pct := done * 100 / total
		line = fmt.Sprintf("%-10s [%s%s] %3d%%", phase, strings.Repeat("#", filled), strings.Repeat(".", barWidth-filled), pct)
	} else if done > 0 {
		line = fmt.Sprintf("%-10s %d", phase, done)
	} else {
		line = fmt.Sprintf("%-10s working…", phase)
	}
	if line == p.last {
		return
	}
	p.last = line
	p.drew = true
	fmt.Fprintf(p.w, "\r%s\x1b[K", line)
}

// done erases the bar so the result prints on a clean line.
func (p *progress) done() {
	if p == nil || !p.on || !p.drew {
		return
	}
	fmt.Fprint(p.w, "\r\x1b[K")
	p.drew, p.last = false, ""
}
