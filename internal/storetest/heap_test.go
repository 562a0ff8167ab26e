package storetest

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
)

// held and piece keep what a test's fn allocates out of the compiler's
// reach, so it is allocated on the heap and held or dropped as written.
var (
	held  [][]byte
	piece []byte
)

// TestHeapGrowthSeesWhatIsHeld: 32 MiB held across collections, in one
// slice or in 4 KiB pieces, is measured; 32 MiB of garbage dropped piece
// by piece, eight times over, is not, nor is garbage the collector has
// not yet taken when fn ends, as on a machine too loaded for it to keep up.
func TestHeapGrowthSeesWhatIsHeld(t *testing.T) {
	const size = 32 << 20
	one := HeapGrowth(func() {
		held = [][]byte{make([]byte, size)}
		for i := 0; i < size; i += 4096 {
			held[0][i] = 1
		}
		churnCollections()
		held = nil
	})
	pieces := HeapGrowth(func() {
		for range size / 4096 {
			held = append(held, make([]byte, 4096))
		}
		churnCollections()
		held = nil
	})
	garbage := HeapGrowth(func() {
		for range 8 * size / 4096 {
			piece = make([]byte, 4096)
		}
		piece = nil
	})
	late := HeapGrowth(func() {
		defer debug.SetGCPercent(debug.SetGCPercent(-1))
		for range size / 4096 {
			piece = make([]byte, 4096)
		}
		piece = nil
		time.Sleep(20 * time.Millisecond)
	})
	t.Logf("heap growth: %.1f MiB held in one slice, %.1f MiB in pieces; %.1f MiB dropping 256 MiB of pieces, %.1f MiB leaving 32 MiB of them uncollected",
		mib(one), mib(pieces), mib(garbage), mib(late))
	assert.GreaterOrEqual(t, one, uint64(size), "held in one slice")
	assert.GreaterOrEqual(t, pieces, uint64(size), "held in pieces")
	assert.Less(t, garbage, uint64(8<<20), "garbage")
	assert.Less(t, late, uint64(8<<20), "garbage not yet collected")
}

// TestLeastHeapGrowthSeesWhatIsHeld: the least of three runs each holding
// 32 MiB is 32 MiB.
func TestLeastHeapGrowthSeesWhatIsHeld(t *testing.T) {
	g := LeastHeapGrowth(3, func() {
		held = [][]byte{make([]byte, 32<<20)}
		churnCollections()
		held = nil
	})
	assert.GreaterOrEqual(t, g, uint64(32<<20))
}

// churnCollections drops small garbage until three collections have
// ended and 20 ms have passed: what fn holds meanwhile is held a while.
func churnCollections() {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	from := s[0].Value.Uint64()
	start := time.Now()
	for s[0].Value.Uint64() < from+3 || time.Since(start) < 20*time.Millisecond {
		for range 64 {
			piece = make([]byte, 4096)
		}
		runtime.Gosched()
		metrics.Read(s)
	}
	piece = nil
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }
