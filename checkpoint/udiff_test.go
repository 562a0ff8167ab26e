package checkpoint_test

import (
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/checkpoint"
)

func TestUnifiedExamples(t *testing.T) {
	cases := []struct {
		name, a, b, want string
	}{
		{"Equal", "x\n", "x\n", ""},
		{"Added", "", "a\nb\n", "--- a/f\n+++ b/f\n@@ -0,0 +1,2 @@\n+a\n+b\n"},
		{"Deleted", "a\n", "", "--- a/f\n+++ b/f\n@@ -1 +0,0 @@\n-a\n"},
		{"MiddleChange", "1\n2\n3\n4\n5\n6\n7\n8\n9\n", "1\n2\n3\n4\nfive\n6\n7\n8\n9\n",
			"--- a/f\n+++ b/f\n@@ -2,7 +2,7 @@\n 2\n 3\n 4\n-5\n+five\n 6\n 7\n 8\n"},
		{"NoNewlineAtEnd", "a\nb", "a\nc", "--- a/f\n+++ b/f\n@@ -1,2 +1,2 @@\n a\n-b\n\\ No newline at end of file\n+c\n\\ No newline at end of file\n"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, checkpoint.Unified("f", c.a, c.b))
		})
	}
}

// apply applies a unified diff produced by Unified to a, for the property
// test: whatever the inputs, the diff must turn a into b.
func apply(t *testing.T, a, diff string) string {
	t.Helper()
	lines := strings.SplitAfter(a, "\n")
	if lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	var out []string
	pos := 0
	body := strings.SplitAfter(diff, "\n")
	for i := 2; i < len(body); i++ {
		l := body[i]
		if l == "" {
			continue
		}
		if strings.HasPrefix(l, "@@") {
			f := strings.Fields(l)
			start, _ := strconv.Atoi(strings.Split(strings.TrimPrefix(f[1], "-"), ",")[0])
			if strings.HasSuffix(f[1], ",0") {
				start++
			}
			for pos < start-1 {
				out = append(out, lines[pos])
				pos++
			}
			continue
		}
		switch l[0] {
		case ' ':
			out = append(out, lines[pos])
			pos++
		case '-':
			pos++
		case '+':
			out = append(out, l[1:])
		}
	}
	out = append(out, lines[pos:]...)
	return strings.Join(out, "")
}

func TestUnifiedRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 7))
	gen := func() string {
		var b strings.Builder
		for range r.IntN(30) {
			fmt.Fprintf(&b, "line %d\n", r.IntN(8))
		}
		return b.String()
	}
	for i := range 500 {
		a, b := gen(), gen()
		d := checkpoint.Unified("f", a, b)
		if a == b {
			require.Empty(t, d)
			continue
		}
		require.Equal(t, b, apply(t, a, d), "case %d:\n%s", i, d)
	}
}

// changed counts the deleted and inserted lines of a unified diff.
func changed(diff string) int {
	n := 0
	for i, l := range strings.SplitAfter(diff, "\n") {
		if i >= 2 && l != "" && (l[0] == '-' || l[0] == '+') {
			n++
		}
	}
	return n
}

// minEdits is the shortest edit distance (deletions plus insertions) by
// dynamic programming over the longest common subsequence.
func minEdits(a, b string) int {
	al, bl := strings.SplitAfter(a, "\n"), strings.SplitAfter(b, "\n")
	al, bl = al[:len(al)-1], bl[:len(bl)-1]
	lcs := make([][]int, len(al)+1)
	for i := range lcs {
		lcs[i] = make([]int, len(bl)+1)
	}
	for i := len(al) - 1; i >= 0; i-- {
		for j := len(bl) - 1; j >= 0; j-- {
			if al[i] == bl[j] {
				lcs[i][j] = lcs[i+1][j+1] + 1
			} else {
				lcs[i][j] = max(lcs[i+1][j], lcs[i][j+1])
			}
		}
	}
	return len(al) + len(bl) - 2*lcs[0][0]
}

func TestUnifiedIsShortest(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 9))
	gen := func(alphabet int) string {
		var b strings.Builder
		for range r.IntN(60) {
			fmt.Fprintf(&b, "l%d\n", r.IntN(alphabet))
		}
		return b.String()
	}
	for i := range 400 {
		alphabet := 2 + i%12
		a, b := gen(alphabet), gen(alphabet)
		d := checkpoint.Unified("f", a, b)
		require.Equal(t, b, apply(t, a, d), "case %d", i)
		require.Equal(t, minEdits(a, b), changed(d), "case %d:\n%s", i, d)
	}
}

// rewrite returns two n-line files that differ on every line but share
// the short lines code has in plenty (blank lines, closing braces), the
// shape that makes a quadratic-memory diff blow up.
func rewrite(n int) (string, string) {
	var a, b strings.Builder
	for i := range n {
		switch i % 5 {
		case 3:
			a.WriteString("}\n")
			b.WriteString("}\n")
		case 4:
			a.WriteString("\n")
			b.WriteString("\n")
		default:
			fmt.Fprintf(&a, "old line %d of the first version\n", i)
			fmt.Fprintf(&b, "new line %d of the second version\n", i)
		}
	}
	return a.String(), b.String()
}

func TestUnifiedRewriteHeapBounded(t *testing.T) {
	for _, shape := range []struct {
		name   string
		second func(string) string
	}{
		{"SharedShortLines", func(b string) string { return b }},
		{"NothingShared", func(b string) string {
			return strings.ReplaceAll(strings.ReplaceAll(b, "}\n", "};\n"), "\n\n", "\n#\n")
		}},
	} {
		t.Run(shape.name, func(t *testing.T) {
			a, b := rewrite(10000)
			b = shape.second(b)
			runtime.GC()
			var before, after runtime.MemStats
			runtime.ReadMemStats(&before)
			stop := make(chan struct{})
			peak := make(chan uint64)
			go func() {
				var top uint64
				var ms runtime.MemStats
				for {
					runtime.ReadMemStats(&ms)
					top = max(top, ms.HeapAlloc)
					select {
					case <-stop:
						peak <- top
						return
					case <-time.After(time.Millisecond):
					}
				}
			}()
			d := checkpoint.Unified("f", a, b)
			runtime.ReadMemStats(&after)
			close(stop)
			top := max(<-peak, after.HeapAlloc)
			require.Equal(t, b, apply(t, a, d))
			// TotalAlloc bounds every heap peak of the call from above,
			// whatever the sampling missed.
			assert.Less(t, after.TotalAlloc-before.TotalAlloc, uint64(64<<20), "bytes allocated")
			assert.Less(t, top-min(top, before.HeapAlloc), uint64(64<<20), "heap growth")
		})
	}
}

func BenchmarkUnifiedRewrite(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		x, y := rewrite(n)
		b.Run(strconv.Itoa(n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				checkpoint.Unified("f", x, y)
			}
		})
	}
}

// TestUnifiedLongFiles: files past the search's line bound still get a
// diff that applies. The lines shared at both ends cost no search, so one
// changed line of a 10,001-line file is one hunk of seven lines; changes
// far apart in a long file are one replacement of what lies between.
func TestUnifiedLongFiles(t *testing.T) {
	lines := func(n int, f func(i int) string) string {
		var b strings.Builder
		for i := range n {
			b.WriteString(f(i))
		}
		return b.String()
	}
	a := lines(10001, func(i int) string { return fmt.Sprintf("%d\n", i) })
	b := strings.Replace(a, "\n5000\n", "\nfive thousand\n", 1)
	d := checkpoint.Unified("n.txt", a, b)
	assert.Equal(t, "--- a/n.txt\n+++ b/n.txt\n@@ -4998,7 +4998,7 @@\n 4997\n 4998\n 4999\n-5000\n+five thousand\n 5001\n 5002\n 5003\n", d)
	require.Equal(t, b, apply(t, a, d))

	// Edits near both ends of 30,000 lines, and a reordering of 12,000
	// shared lines: past the bound, replaced whole, and still exact.
	c := "first\n" + a[2:] + lines(20000, func(i int) string { return fmt.Sprintf("more %d\n", i) })
	c = c[:len(c)-len("more 19999\n")] + "last\n"
	a2 := a + lines(20000, func(i int) string { return fmt.Sprintf("more %d\n", i) })
	d = checkpoint.Unified("n.txt", a2, c)
	require.Equal(t, c, apply(t, a2, d))
	assert.Equal(t, 2*30001, changed(d), "every line from the first change to the last, replaced")

	shuffled := lines(12000, func(i int) string { return fmt.Sprintf("%d\n", (i*7919)%12000) })
	plain := lines(12000, func(i int) string { return fmt.Sprintf("%d\n", i) })
	d = checkpoint.Unified("s.txt", plain, shuffled)
	require.Equal(t, shuffled, apply(t, plain, d))
}
