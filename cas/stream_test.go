package cas_test

import (
	"context"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"lukechampine.com/blake3"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

// heapPeak samples the live heap every few milliseconds until stopped and
// reports the highest value seen.
type heapPeak struct {
	peak atomic.Uint64
	stop chan struct{}
	wg   sync.WaitGroup
}

func watchHeap() *heapPeak {
	p := &heapPeak{stop: make(chan struct{})}
	p.wg.Go(func() {
		var ms runtime.MemStats
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			runtime.ReadMemStats(&ms)
			if v := max(ms.HeapAlloc, ms.HeapInuse); v > p.peak.Load() {
				p.peak.Store(v)
			}
			select {
			case <-p.stop:
				return
			case <-tick.C:
			}
		}
	})
	return p
}

// Stop ends sampling and returns the peak in bytes.
func (p *heapPeak) Stop() uint64 {
	close(p.stop)
	p.wg.Wait()
	return p.peak.Load()
}

// TestStreamLarge puts and gets 256 MiB that never exist in memory at once:
// the input comes from a seeded generator and is hashed on the fly, and the
// output is hashed as it streams out. The heap stays far below the size of
// the content all along. (The peak is about twice what is live, as the
// collector paces itself: about 12 MiB for a Put's buffers and encoder,
// which the store keeps for the next Put, plus a chunk or two in flight.)
func TestStreamLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("256 MiB round trip")
	}
	const size = 256 << 20
	const heapLimit = 48 << 20
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{})

	runtime.GC()
	in := blake3.New(32, nil)
	peak := watchHeap()
	h, err := s.Put(ctx, io.TeeReader(io.LimitReader(randomReader(256), size), in))
	putPeak := peak.Stop()
	require.NoError(t, err)
	var want cas.Hash
	in.Sum(want[:0])
	require.Equal(t, want, h, "Put returns the hash of what it read")

	info, err := s.Stat(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, int64(size), info.Size)
	assert.Equal(t, cas.CodecChunked, info.Codec)
	assert.GreaterOrEqual(t, info.Chunks, size/(4<<20))
	assert.Equal(t, int64(size), info.Stored, "random data is stored raw")

	runtime.GC()
	out := blake3.New(32, nil)
	peak = watchHeap()
	rc, err := s.Get(ctx, h)
	require.NoError(t, err)
	n, err := io.CopyBuffer(out, rc, make([]byte, 256<<10))
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	getPeak := peak.Stop()
	assert.Equal(t, int64(size), n)
	var got cas.Hash
	out.Sum(got[:0])
	assert.Equal(t, want, got, "Get streams the content back")

	t.Logf("heap peak: Put %.1f MiB, Get %.1f MiB", float64(putPeak)/(1<<20), float64(getPeak)/(1<<20))
	assert.Less(t, putPeak, uint64(heapLimit), "Put heap peak")
	assert.Less(t, getPeak, uint64(heapLimit), "Get heap peak")
}
