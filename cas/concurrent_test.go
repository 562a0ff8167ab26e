package cas_test

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// TestConcurrentPuts has 8 goroutines put the same and different content
// at once, small and chunked, by Put and PutBytes, reading back as they go.
// Every call succeeds (waiting for the write lock never surfaces as busy),
// and each content is stored once.
func TestConcurrentPuts(t *testing.T) {
	ctx := context.Background()
	const workers, rounds = 8, 3
	// A small InlineMax makes 1 MiB content chunked without needing tens
	// of megabytes per goroutine.
	db, s := storetest.OpenCAS(t, cas.Options{InlineMax: 64 << 10})

	shared := [][]byte{
		textBytes(10<<10, 1),   // inline, zstd
		randomBytes(10<<10, 1), // inline, raw
		textBytes(1<<20, 2),    // chunked
		randomBytes(1<<20, 2),  // chunked
	}
	own := make([][][]byte, workers)
	for w := range own {
		own[w] = [][]byte{textBytes(20<<10, uint64(100+w)), randomBytes(1<<20, uint64(100+w))}
	}

	var wg sync.WaitGroup
	errs := make(chan error, workers*rounds*(len(shared)+2)*2)
	for w := range workers {
		wg.Go(func() {
			for r := range rounds {
				for i, data := range append(append([][]byte{}, shared...), own[w]...) {
					var h cas.Hash
					var err error
					if (w+r+i)%2 == 0 {
						h, err = s.Put(ctx, bytes.NewReader(data))
					} else {
						h, err = s.PutBytes(ctx, nil, data)
					}
					if err != nil {
						errs <- fmt.Errorf("worker %d put %d: %w", w, i, err)
						continue
					}
					got, err := s.ReadAll(ctx, h)
					if err == nil && !bytes.Equal(got, data) {
						err = fmt.Errorf("read back %d bytes, want %d", len(got), len(data))
					}
					if err != nil {
						errs <- fmt.Errorf("worker %d get %d: %w", w, i, err)
					}
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.False(t, wserr.Is(err, wserr.Busy), "busy surfaced: %v", err)
		assert.NoError(t, err)
	}

	want := len(shared) + workers*2
	assert.Equal(t, want, count(t, db, `SELECT count(*) FROM blobs`), "one blob row per content")
	for _, data := range shared {
		assert.Equal(t, 1, count(t, db, `SELECT count(*) FROM blobs WHERE hash = ?`, cas.Sum(data)))
	}
	// Every chunk row is listed by some blob (nothing was written twice
	// under another name), and every blob lists its chunks once.
	assert.Equal(t, count(t, db, `SELECT count(DISTINCT chunk) FROM blob_chunks`), count(t, db, `SELECT count(*) FROM chunks`))
	chunked := count(t, db, `SELECT count(*) FROM blobs WHERE codec = ?`, int(cas.CodecChunked))
	assert.Equal(t, 2+workers, chunked)
	var lists []struct {
		N   int   `db:"n"`
		Sum int64 `db:"total"`
	}
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &lists, `SELECT count(*) AS n, sum(c.size) AS total FROM blob_chunks bc
			JOIN chunks c ON c.hash = bc.chunk GROUP BY bc.blob`)
	}))
	require.Len(t, lists, chunked)
	for _, l := range lists {
		assert.Equal(t, int64(1<<20), l.Sum, "a chunk list covers its blob exactly once")
	}
}
