package checkpoint

import (
	"fmt"
	"strings"
)

// maxDiffLines bounds the lines, between the first and the last that
// differ, that Unified searches for a shortest edit script. Memory stays
// linear in the line count whatever the inputs, but the search's time is
// O((N+M)·D), so past it that stretch is given as one replacement: a
// correct diff, not a shortest one.
const maxDiffLines = 20000

// Unified returns a unified diff (3 lines of context) turning a into b,
// with "--- a/path" and "+++ b/path" headers (ending in a tab when path
// holds a space, as git's do); "" when they are equal. Its
// memory is linear in the number of lines of a and b. The lines a and b
// share at their start and end cost no search, whatever their number;
// when more than maxDiffLines lines lie between, they are deleted and
// inserted whole.
func Unified(path string, a, b string) string {
	text, _ := unified("a/"+path, "b/"+path, a, b, 0)
	return text
}

// unified is Unified with the headers' names given ("a/PATH", or
// /dev/null for the missing side of an added or deleted file) and a cap
// on the output: when limit > 0, hunks that would take the text past
// limit bytes are left out, and their count is returned. The headers are
// always written.
func unified(oldName, newName string, a, b string, limit int) (string, int) {
	if a == b {
		return "", 0
	}
	al, bl := splitLines(a), splitLines(b)
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", headerName(oldName), headerName(newName))
	omitted := writeHunks(&out, editScript(al, bl), al, bl, 3, limit)
	return out.String(), omitted
}

// headerName is name as a ---/+++ header gives it: as git does, a name
// with a space ends in a tab, since patch(1) reads a name only up to
// whitespace unless a tab ends it.
func headerName(name string) string {
	if strings.Contains(name, " ") {
		return name + "\t"
	}
	return name
}

// editScript returns an edit script turning a into b: the lines they share
// at both ends as they are, and between them a shortest script
// (diffLines), or, past maxDiffLines lines, every line of a deleted and
// every line of b inserted.
func editScript(a, b []string) []edit {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	out := make([]edit, 0, max(len(a), len(b))+min(len(ma), len(mb)))
	for i := range pre {
		out = append(out, edit{opEqual, i, i})
	}
	if len(ma)+len(mb) > maxDiffLines {
		for i := range ma {
			out = append(out, edit{opDel, pre + i, pre})
		}
		for i := range mb {
			out = append(out, edit{opIns, pre + len(ma), pre + i})
		}
	} else {
		for _, e := range diffLines(ma, mb) {
			out = append(out, edit{e.kind, pre + e.a, pre + e.b})
		}
	}
	for i := range suf {
		out = append(out, edit{opEqual, len(a) - suf + i, len(b) - suf + i})
	}
	return out
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

// diffLines returns a shortest edit script turning a into b, with the
// deletions of each changed run before its insertions. Lines are first
// numbered, and lines found on one side only are set aside: they can never
// match, so the longest common subsequence of what remains is that of a
// and b, and a rewrite that shares no line costs no search at all. The
// search is Myers' linear-space refinement (divide and conquer on the
// middle snake), so memory is O(N+M) rather than the O((N+M)·D) of keeping
// the trace.
func diffLines(a, b []string) []edit {
	ids := make(map[string]int, len(a))
	ai := make([]int, len(a))
	for i, l := range a {
		id, ok := ids[l]
		if !ok {
			id = len(ids)
			ids[l] = id
		}
		ai[i] = id
	}
	inB := make([]bool, len(ids))
	bi := make([]int, len(b))
	for i, l := range b {
		id, ok := ids[l]
		if !ok {
			id = -1
		} else {
			inB[id] = true
		}
		bi[i] = id
	}
	// Keep only lines present on both sides, remembering where each came from.
	var ra, rb, ia, ib []int
	for i, id := range ai {
		if inB[id] {
			ra, ia = append(ra, id), append(ia, i)
		}
	}
	for i, id := range bi {
		if id >= 0 {
			rb, ib = append(rb, id), append(ib, i)
		}
	}
	m := &myers{a: ra, b: rb}
	size := 2*(len(ra)+len(rb)) + 4
	m.vf, m.vb = make([]int, size), make([]int, size)
	m.compare(0, len(ra), 0, len(rb))

	out := make([]edit, 0, max(len(a), len(b))+len(m.matches)/2)
	x, y := 0, 0
	flush := func(ux, uy int) {
		for ; x < ux; x++ {
			out = append(out, edit{opDel, x, y})
		}
		for ; y < uy; y++ {
			out = append(out, edit{opIns, x, y})
		}
	}
	for _, p := range m.matches {
		mx, my := ia[p[0]], ib[p[1]]
		flush(mx, my)
		out = append(out, edit{opEqual, x, y})
		x, y = x+1, y+1
	}
	flush(len(a), len(b))
	return out
}

// myers finds a longest common subsequence of a and b; vf and vb are the
// forward and reverse frontiers, reused by every step of the recursion.
type myers struct {
	a, b    []int
	vf, vb  []int
	matches [][2]int // matched (a, b) index pairs, ascending
}

func (m *myers) match(x, y, n int) {
	for i := range n {
		m.matches = append(m.matches, [2]int{x + i, y + i})
	}
}

// compare records the matches of a[a0:a1] against b[b0:b1] in order.
func (m *myers) compare(a0, a1, b0, b1 int) {
	pre := 0
	for a0+pre < a1 && b0+pre < b1 && m.a[a0+pre] == m.b[b0+pre] {
		pre++
	}
	m.match(a0, b0, pre)
	a0, b0 = a0+pre, b0+pre
	suf := 0
	for a1-suf > a0 && b1-suf > b0 && m.a[a1-1-suf] == m.b[b1-1-suf] {
		suf++
	}
	a1, b1 = a1-suf, b1-suf
	if a0 < a1 && b0 < b1 {
		// Both sides are non-empty and differ at both ends, so D ≥ 2 and
		// each half below has a strictly smaller D: the recursion ends.
		x, y, u, v := m.middleSnake(a0, a1, b0, b1)
		m.compare(a0, x, b0, y)
		m.match(x, y, u-x)
		m.compare(u, a1, v, b1)
	}
	m.match(a1, b1, suf)
}

// middleSnake returns the snake (x, y)→(u, v) in the middle of a shortest
// edit path from (a0, b0) to (a1, b1), searching from both ends at once.
func (m *myers) middleSnake(a0, a1, b0, b1 int) (x, y, u, v int) {
	n, mm := a1-a0, b1-b0
	delta := n - mm
	odd := delta&1 != 0
	dmax := (n + mm + 1) / 2
	off := dmax + 1
	vf, vb := m.vf, m.vb
	vf[off+1], vb[off+1] = 0, 0
	for d := 0; d <= dmax; d++ {
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && vf[off+k-1] < vf[off+k+1]) {
				x = vf[off+k+1]
			} else {
				x = vf[off+k-1] + 1
			}
			y := x - k
			sx, sy := x, y
			for x < n && y < mm && m.a[a0+x] == m.b[b0+y] {
				x, y = x+1, y+1
			}
			vf[off+k] = x
			if odd && k >= delta-(d-1) && k <= delta+(d-1) && x+vb[off+delta-k] >= n {
				return a0 + sx, b0 + sy, a0 + x, b0 + y
			}
		}
		for k := -d; k <= d; k += 2 {
			var x int
			if k == -d || (k != d && vb[off+k-1] < vb[off+k+1]) {
				x = vb[off+k+1]
			} else {
				x = vb[off+k-1] + 1
			}
			y := x - k
			sx, sy := x, y
			for x < n && y < mm && m.a[a1-1-x] == m.b[b1-1-y] {
				x, y = x+1, y+1
			}
			vb[off+k] = x
			if !odd && delta-k >= -d && delta-k <= d && x+vf[off+delta-k] >= n {
				return a0 + n - x, b0 + mm - y, a0 + n - sx, b0 + mm - sy
			}
		}
	}
	panic("checkpoint: middle snake not found")
}

// writeHunks groups edits into hunks with ctx lines of context. When
// limit > 0 it stops before the first hunk that would take out past limit
// bytes and returns how many hunks it left out.
func writeHunks(out *strings.Builder, ops []edit, a, b []string, ctx, limit int) int {
	omitted := 0
	for i := 0; i < len(ops); {
		for i < len(ops) && ops[i].kind == opEqual {
			i++
		}
		if i == len(ops) {
			return omitted
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
		i = end
		if omitted > 0 {
			omitted++
			continue
		}
		aStart, bStart, aLen, bLen := -1, -1, 0, 0
		size := 0
		for _, e := range ops[start:end] {
			switch e.kind {
			case opEqual:
				aLen++
				bLen++
				size += 1 + len(a[e.a])
			case opDel:
				aLen++
				size += 1 + len(a[e.a])
			case opIns:
				bLen++
				size += 1 + len(b[e.b])
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
		header := fmt.Sprintf("@@ -%s +%s @@\n", hunkRange(aStart, aLen), hunkRange(bStart, bLen))
		if limit > 0 && out.Len()+len(header)+size > limit {
			omitted++
			continue
		}
		out.WriteString(header)
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
	}
	return omitted
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
