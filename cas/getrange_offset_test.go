package cas_test

import (
	"bytes"
	"context"
	"io"
	"math"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/wserr"
)

// TestGetRangeFromOffsetReadsOnlyFromThere: a read from an offset into chunked content
// returns the content's tail and reads only the chunks from the one that
// holds the offset, so reading the end of a large file costs a chunk, not
// the file.
func TestGetRangeFromOffsetReadsOnlyFromThere(t *testing.T) {
	ctx := context.Background()
	db, s, faults := openFaulty(t, cas.Options{})
	data := randomBytes(24<<20, 7)
	var h cas.Hash
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		var err error
		h, err = s.PutBytes(ctx, tx, data)
		return err
	}))
	info, err := s.Stat(ctx, h)
	require.NoError(t, err)
	require.Greater(t, info.Chunks, 4, "the content is chunked")

	readFrom := func(off int64, n int) ([]byte, int) {
		before := faults.Calls(storagetest.Get)
		rc, err := s.GetRange(ctx, h, off, -1)
		require.NoError(t, err)
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, int64(n)))
		require.NoError(t, err)
		return b, faults.Calls(storagetest.Get) - before
	}
	t.Run("OK/Tail", func(t *testing.T) {
		off := int64(len(data) - 1000)
		got, gets := readFrom(off, 1<<30)
		assert.True(t, bytes.Equal(data[off:], got))
		assert.LessOrEqual(t, gets, 3, "the blob row and at most two chunks")
	})
	t.Run("OK/Middle", func(t *testing.T) {
		off := int64(len(data) / 2)
		got, gets := readFrom(off, 100)
		assert.True(t, bytes.Equal(data[off:off+100], got))
		assert.LessOrEqual(t, gets, 3)
	})
	t.Run("OK/Start", func(t *testing.T) {
		got, _ := readFrom(0, 1<<30)
		assert.True(t, bytes.Equal(data, got), "from 0 the whole content, verified whole")
	})
	t.Run("OK/PastEnd", func(t *testing.T) {
		got, _ := readFrom(int64(len(data)+5), 10)
		assert.Empty(t, got)
	})
	t.Run("OK/Inline", func(t *testing.T) {
		small := []byte("hello, world")
		var hs cas.Hash
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			var err error
			hs, err = s.PutBytes(ctx, tx, small)
			return err
		}))
		rc, err := s.GetRange(ctx, hs, 7, -1)
		require.NoError(t, err)
		b, err := io.ReadAll(rc)
		require.NoError(t, err)
		assert.Equal(t, "world", string(b))
	})
	t.Run("OK/LengthPastEnd", func(t *testing.T) {
		// A range past the end is cut at the end, however far past it
		// its length reaches: off+n beyond any int64 included.
		for _, n := range []int64{int64(len(data)), math.MaxInt64 - 10, math.MaxInt64} {
			off := int64(len(data) - 1000)
			rc, err := s.GetRange(ctx, h, off, n)
			require.NoError(t, err)
			b, err := io.ReadAll(rc)
			rc.Close()
			require.NoError(t, err)
			assert.True(t, bytes.Equal(data[off:], b), "n %d: %d bytes", n, len(b))
		}
	})
	t.Run("ErrNegative", func(t *testing.T) {
		_, err := s.GetRange(ctx, h, -1, -1)
		assert.True(t, wserr.Is(err, wserr.InvalidArgument), "%v", err)
	})
}
