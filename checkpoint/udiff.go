package checkpoint

import (
	"fmt"
	"strings"
)

// maxDiffLines bounds the line count Unified diffs in full; past it the
// O(N·D) search could cost too much, and a summary is returned instead.
const maxDiffLines = 20000

// Unified returns a unified diff (3 lines of context) turning a into b,
// with "--- a/path" and "+++ b/path" headers; "" when they are equal.
func Unified(path string, a, b string) string {
	if a == b {
		return ""
	}
	al, bl := splitLines(a), splitLines(b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- a/%s\n+++ b/%s\n", path, path)
	if len(al)+len(bl) > maxDiffLines {
		fmt.Fprintf(&out, "@@ -1,%d +1,%d @@ (too many lines to diff: %d → %d)\n", len(al), len(bl), len(al), len(bl))
		return out.String()
	}
	ops := diffLines(al, bl)
	writeHunks(&out, ops, al, bl, 3)
	return out.String()
}

// splitLines splits s after each '\n', keeping the newline; a missing
// final newline is marked like diff(1) does.
func splitLines(s string) []string {
	if s == "" {
		return nil
	}
	lines := strings.SplitAfter(s, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	} else {
		lines[len(lines)-1] += "\n\\ No newline at end of file\n"
	}
	return lines
}

type opKind byte

const (
	opEqual opKind = ' '
	opDel   opKind = '-'
	opIns   opKind = '+'
)

type edit struct {
	kind opKind
	a, b int // line index in a (for equal/del) and b (for equal/ins)
}

// diffLines is Myers' O(N·D) greedy algorithm with the trace kept for the
// backward pass.
func diffLines(a, b []string) []edit {
	n, m := len(a), len(b)
	max := n + m
	off := max + 1
	v := make([]int, 2*max+2)
	var trace [][]int
	for d := 0; d <= max; d++ {
		trace = append(trace, append([]int(nil), v...))
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
				x = v[off+k+1]
			} else {
				x = v[off+k-1] + 1
			}
			y := x - k
			for x < n && y < m && a[x] == b[y] {
				x, y = x+1, y+1
			}
			v[off+k] = x
			if x >= n && y >= m {
				return backtrack(trace, a, b, off, d)
			}
		}
	}
	return nil
}

func backtrack(trace [][]int, a, b []string, off, d int) []edit {
	x, y := len(a), len(b)
	var rev []edit
	for ; d > 0; d-- {
		v := trace[d]
		k := x - y
		var pk int
		if k == -d || (k != d && v[off+k-1] < v[off+k+1]) {
			pk = k + 1
		} else {
			pk = k - 1
		}
		px := v[off+pk]
		py := px - pk
		for x > px && y > py {
			x, y = x-1, y-1
			rev = append(rev, edit{opEqual, x, y})
		}
		if x == px {
			y--
			rev = append(rev, edit{opIns, x, y})
		} else {
			x--
			rev = append(rev, edit{opDel, x, y})
		}
	}
	for x > 0 && y > 0 {
		x, y = x-1, y-1
		rev = append(rev, edit{opEqual, x, y})
	}
	out := make([]edit, len(rev))
	for i, e := range rev {
		out[len(rev)-1-i] = e
	}
	return out
}

// writeHunks groups edits into hunks with ctx lines of context.
func writeHunks(out *strings.Builder, ops []edit, a, b []string, ctx int) {
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == opEqual {
			i++
		}
		if i == len(ops) {
			return
		}
		start := max(i-ctx, 0)
		end := i
		for end < len(ops) {
			if ops[end].kind != opEqual {
				end++
				continue
			}
			run := end
			for run < len(ops) && ops[run].kind == opEqual {
				run++
			}
			if run == len(ops) || run-end > 2*ctx {
				end = min(end+ctx, len(ops))
				break
			}
			end = run
		}
		aStart, bStart, aLen, bLen := -1, -1, 0, 0
		for _, e := range ops[start:end] {
			switch e.kind {
			case opEqual:
				aLen++
				bLen++
			case opDel:
				aLen++
			case opIns:
				bLen++
			}
			if aStart < 0 && e.kind != opIns {
				aStart = e.a
			}
			if bStart < 0 && e.kind != opDel {
				bStart = e.b
			}
		}
		if aStart < 0 {
			aStart = ops[start].a
		}
		if bStart < 0 {
			bStart = ops[start].b
		}
		fmt.Fprintf(out, "@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		for _, e := range ops[start:end] {
			line := ""
			switch e.kind {
			case opEqual, opDel:
				line = a[e.a]
			case opIns:
				line = b[e.b]
			}
			out.WriteByte(byte(e.kind))
			out.WriteString(line)
		}
		i = end
	}
}

func hunkRange(start, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", start)
	}
	if n == 1 {
		return fmt.Sprintf("%d", start+1)
	}
	return fmt.Sprintf("%d,%d", start+1, n)
}
