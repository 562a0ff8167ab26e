package runs

import (
	"fmt"
	"testing"
)

// BenchmarkNormalizeLargeProfile checks a profile near MaxProfileBytes:
// 100,000 distinct roots, each visible and writable.
func BenchmarkNormalizeLargeProfile(b *testing.B) {
	roots := make([]string, 100_000)
	for i := range roots {
		roots[i] = fmt.Sprintf("r%d", i)
	}
	p := Profile{VisibleRoots: roots, WritableRoots: roots}
	for b.Loop() {
		if _, err := p.normalize(); err != nil {
			b.Fatal(err)
		}
	}
}
