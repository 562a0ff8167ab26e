package cas_test

import (
	"context"
	"runtime"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// TestDictTrainingMemoryDoesNotGrowWithBlobs trains a dictionary over
// 2,000 and then 20,000 small blobs: the training counts the candidates in
// one pass over the blob rows and picks its samples in another, so the
// heap it needs is the samples' and not a list of every small blob (20,000
// entries of a row each would take 3.5 MB; that list grew the heap by 12 MiB here).
func TestDictTrainingMemoryDoesNotGrowWithBlobs(t *testing.T) {
	if testing.Short() {
		t.Skip("20,000 blobs")
	}
	ctx := context.Background()
	growth := func(blobs int) (uint64, cas.DictInfo) {
		// no training until the one measured
		s, db := newDictStore(t, cas.Options{DictTrainAfter: 1 << 30})
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			for i := range blobs {
				if _, err := s.PutBytes(ctx, tx, smallFile(i)); err != nil {
					return err
				}
			}
			return nil
		}))
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		base := max(ms.HeapAlloc, ms.HeapInuse)
		peak := watchHeap()
		info, ok, err := s.TrainDict(ctx)
		top := peak.Stop()
		require.NoError(t, err)
		require.True(t, ok, "a dictionary pays on the corpus")
		return top - min(top, base), info
	}
	small, si := growth(2000)
	large, li := growth(20000)
	t.Logf("heap growth while training: %.1f MiB over %d blobs, %.1f MiB over %d", float64(small)/(1<<20), si.Blobs, float64(large)/(1<<20), li.Blobs)
	assert.EqualValues(t, 2000, si.Blobs)
	assert.EqualValues(t, 20000, li.Blobs)
	assert.EqualValues(t, li.Samples, si.Samples, "as many samples from either store")
	assert.Less(t, large, small+3<<20, "the heap a training needs does not grow with the store's small blobs")
}
