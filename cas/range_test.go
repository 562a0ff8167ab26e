package cas_test

import (
	"bytes"
	"context"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

// TestGetRange reads ranges of a chunked and of a one-row blob: the bytes
// are the content's, and a range of a chunked blob reads only the chunks it
// overlaps.
func TestGetRange(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{InlineMax: 64 << 10})
	rng := rand.New(rand.NewPCG(1, 2))
	big := make([]byte, 12<<20)
	for i := range big {
		big[i] = byte(rng.IntN(16)) // compressible, but not by much
	}
	small := big[:40<<10]
	hBig, err := s.Put(ctx, bytes.NewReader(big))
	require.NoError(t, err)
	hSmall, err := s.Put(ctx, bytes.NewReader(small))
	require.NoError(t, err)

	read := func(h cas.Hash, off, n int64) []byte {
		rc, err := s.GetRange(ctx, h, off, n)
		require.NoError(t, err)
		defer rc.Close()
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		return b
	}
	want := func(content []byte, off, n int64) []byte {
		end := int64(len(content))
		if n >= 0 && off+n < end {
			end = off + n
		}
		if off > end {
			return []byte{}
		}
		return content[off:end]
	}
	for _, tc := range []struct {
		name   string
		off, n int64
	}{
		{"Whole", 0, -1}, {"Head", 0, 100}, {"Middle", 5<<20 + 17, 3 << 20}, {"Tail", 12<<20 - 10, -1},
		{"PastEnd", 12<<20 - 10, 100}, {"AtEnd", 12 << 20, -1}, {"Empty", 4 << 20, 0}, {"OneByte", 7<<20 + 3, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			assert.True(t, bytes.Equal(want(big, tc.off, tc.n), read(hBig, tc.off, tc.n)), "chunked")
			off := min(tc.off, int64(len(small)))
			assert.True(t, bytes.Equal(want(small, off, tc.n), read(hSmall, off, tc.n)), "one row")
		})
	}
	t.Run("ReadsOnlyItsChunks", func(t *testing.T) {
		before := cas.ChunkReads(s)
		read(hBig, 0, -1)
		all := cas.ChunkReads(s) - before
		require.Greater(t, all, int64(4), "the content has several chunks")
		before = cas.ChunkReads(s)
		read(hBig, 6<<20, 1)
		assert.Equal(t, int64(1), cas.ChunkReads(s)-before, "one byte reads one chunk")
	})
	t.Run("ErrNegativeOffset", func(t *testing.T) {
		_, err := s.GetRange(ctx, hBig, -1, 1)
		assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	})
	t.Run("ErrNotFound", func(t *testing.T) {
		_, err := s.GetRange(ctx, cas.Sum([]byte("nope")), 0, 1)
		assert.ErrorIs(t, err, cas.ErrNotFound)
	})
}
