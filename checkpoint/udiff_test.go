package checkpoint_test

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

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
