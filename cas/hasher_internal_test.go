package cas

import (
	"math/rand/v2"
	"testing"

	"lukechampine.com/blake3"
)

// hashLengths are the content lengths around every boundary of BLAKE3's
// tree that the hasher handles on its own: a block, a chunk, a group of
// 16 chunks, and the subtrees of groups above it.
func hashLengths() []int {
	var ns []int
	for _, n := range []int{0, 1, 63, 64, 65, 1023, 1024, 1025, 2048, 8 << 10, 9 << 10} {
		ns = append(ns, n, n+1)
	}
	for k := 1; k <= 70; k++ {
		g := k * groupSize
		ns = append(ns, g-1025, g-1024, g-1, g, g+1, g+1024, g+1025)
	}
	return append(ns, 700_123, 1<<20, 1<<20+5, 70*groupSize+1025)
}

// Sum and a hasher fed in pieces of any size agree with the BLAKE3
// package's own Hasher on every length.
func TestHasherMatchesBlake3(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, 70*groupSize+1025)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	var h hasher
	for _, n := range hashLengths() {
		b := data[:n]
		want := Hash(blake3.Sum256(b))
		if got := Sum(b); got != want {
			t.Fatalf("Sum of %d bytes = %s, want %s", n, got.Short(), want.Short())
		}
		h.reset()
		for rest := b; len(rest) > 0; {
			k := min(len(rest), 1+rng.IntN(3*groupSize))
			h.Write(rest[:k])
			rest = rest[k:]
		}
		if got := h.sum(); got != want {
			t.Fatalf("hasher fed in pieces, %d bytes = %s, want %s", n, got.Short(), want.Short())
		}
	}
}

// Sum allocates nothing, whatever the length: every version a write
// stores or reads is hashed.
func TestSumAllocatesNothing(t *testing.T) {
	b := make([]byte, 700_123)
	for _, n := range []int{100, 5000, len(b)} {
		if a := testing.AllocsPerRun(20, func() { Sum(b[:n]) }); a != 0 {
			t.Errorf("Sum of %d bytes allocates %.0f times", n, a)
		}
	}
}
