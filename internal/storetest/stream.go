package storetest

import (
	"fmt"
	"io"
)

// Text returns a reader of n bytes of deterministic text, made as it is
// read, so a test can stream a file of any size without holding it.
func Text(n int64) io.Reader { return &text{left: n} }

type text struct {
	left, line int64
	pending    []byte
}

func (g *text) Read(b []byte) (int, error) {
	if g.left == 0 {
		return 0, io.EOF
	}
	n := 0
	for n < len(b) && g.left > 0 {
		if len(g.pending) == 0 {
			g.line++
			g.pending = fmt.Appendf(g.pending[:0], "line %d: %x the quick brown fox\n", g.line, g.line*2654435761)
		}
		k := min(copy(b[n:], g.pending), int(g.left))
		g.pending = g.pending[k:]
		n += k
		g.left -= int64(k)
	}
	return n, nil
}
