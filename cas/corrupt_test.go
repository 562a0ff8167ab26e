package cas_test

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// flip returns a copy of b with the byte at i inverted.
func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0xff
	return c
}

// blobData and chunkData return a stored row's data column.
func blobData(t *testing.T, db *index.DB, h cas.Hash) []byte {
	t.Helper()
	return column(t, db, `SELECT data FROM blobs WHERE hash = ?`, h)
}

func chunkData(t *testing.T, db *index.DB, h cas.Hash) []byte {
	t.Helper()
	return column(t, db, `SELECT data FROM chunks WHERE hash = ?`, h)
}

func column(t *testing.T, db *index.DB, query string, h cas.Hash) []byte {
	t.Helper()
	ctx := context.Background()
	var b []byte
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error { return tx.GetContext(ctx, &b, query, h) }))
	return b
}

// TestCorruption alters stored rows behind the store's back, with SQL, and
// checks that reading fails with ErrCorrupt, returns no wrong bytes, and
// that Verify reports the damage. Each case mends the row afterwards, so
// the store passes the checks every test ends with.
func TestCorruption(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		data []byte
		// spoil damages the store and returns the function that mends it,
		// and the kinds Verify must report.
		spoil func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (mend func(), kinds []string)
		// lateDetect: every chunk verifies but the list names a wrong one,
		// which only the hash of the whole catches, at the end: Get streams
		// the listed chunks, then fails instead of reaching EOF.
		lateDetect bool
	}{
		{
			name: "ErrCorrupt/RawBlobByte",
			data: randomBytes(8<<10, 1),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				orig := blobData(t, db, h)
				exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, flip(orig, 4000), h)
				return func() { exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, orig, h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/RawBlobLastByte",
			data: randomBytes(8<<10, 2),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				orig := blobData(t, db, h)
				exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, flip(orig, len(orig)-1), h)
				return func() { exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, orig, h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/ZstdBlobByte",
			data: textBytes(64<<10, 1),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				orig := blobData(t, db, h)
				exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, flip(orig, len(orig)/2), h)
				return func() { exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, orig, h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/ZstdBlobTruncated",
			data: textBytes(64<<10, 2),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				orig := blobData(t, db, h)
				exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, orig[:len(orig)-10], h)
				return func() { exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, orig, h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/BlobDataGone",
			data: textBytes(64<<10, 3),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				orig := blobData(t, db, h)
				exec(t, db, `UPDATE blobs SET data = NULL WHERE hash = ?`, h)
				return func() { exec(t, db, `UPDATE blobs SET data = ? WHERE hash = ?`, orig, h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/BlobSizeWrong",
			data: randomBytes(8<<10, 3),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				exec(t, db, `UPDATE blobs SET size = size + 1 WHERE hash = ?`, h)
				return func() { exec(t, db, `UPDATE blobs SET size = size - 1 WHERE hash = ?`, h) }, []string{"blob"}
			},
		},
		{
			// A corrupt size must not make Get allocate it.
			name: "ErrCorrupt/BlobSizeHuge",
			data: textBytes(64<<10, 4),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				exec(t, db, `UPDATE blobs SET size = ? WHERE hash = ?`, int64(1)<<60, h)
				return func() { exec(t, db, `UPDATE blobs SET size = ? WHERE hash = ?`, 64<<10, h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/BlobCodecWrong",
			data: textBytes(64<<10, 5),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				exec(t, db, `UPDATE blobs SET codec = ? WHERE hash = ?`, int(cas.CodecRaw), h)
				return func() { exec(t, db, `UPDATE blobs SET codec = ? WHERE hash = ?`, int(cas.CodecZstd), h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/BlobDeltaUnsupported",
			data: textBytes(64<<10, 6),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				exec(t, db, `UPDATE blobs SET codec = ? WHERE hash = ?`, int(cas.CodecDelta), h)
				return func() { exec(t, db, `UPDATE blobs SET codec = ? WHERE hash = ?`, int(cas.CodecZstd), h) }, []string{"blob"}
			},
		},
		{
			name: "ErrCorrupt/RawChunkByte",
			data: randomBytes(12<<20, 1),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				c := chunkList(t, db, h)[1]
				orig := chunkData(t, db, c)
				exec(t, db, `UPDATE chunks SET data = ? WHERE hash = ?`, flip(orig, 12345), c)
				return func() { exec(t, db, `UPDATE chunks SET data = ? WHERE hash = ?`, orig, c) }, []string{"chunk", "blob"}
			},
		},
		{
			name: "ErrCorrupt/ZstdChunkByte",
			data: textBytes(12<<20, 1),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				l := chunkList(t, db, h)
				c := l[len(l)-1]
				orig := chunkData(t, db, c)
				exec(t, db, `UPDATE chunks SET data = ? WHERE hash = ?`, flip(orig, len(orig)/3), c)
				return func() { exec(t, db, `UPDATE chunks SET data = ? WHERE hash = ?`, orig, c) }, []string{"chunk", "blob"}
			},
		},
		{
			name: "ErrCorrupt/FirstChunkTruncated",
			data: textBytes(12<<20, 2),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				c := chunkList(t, db, h)[0]
				orig := chunkData(t, db, c)
				exec(t, db, `UPDATE chunks SET data = ? WHERE hash = ?`, orig[:len(orig)/2], c)
				return func() { exec(t, db, `UPDATE chunks SET data = ? WHERE hash = ?`, orig, c) }, []string{"chunk", "blob"}
			},
		},
		{
			name: "ErrCorrupt/ChunkListGap",
			data: randomBytes(12<<20, 2),
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				var row struct {
					Chunk cas.Hash `db:"chunk"`
					Off   int64    `db:"off"`
				}
				ctx := context.Background()
				require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
					return tx.GetContext(ctx, &row, `SELECT chunk, off FROM blob_chunks WHERE blob = ? AND idx = 1`, h)
				}))
				exec(t, db, `DELETE FROM blob_chunks WHERE blob = ? AND idx = 1`, h)
				return func() {
					exec(t, db, `INSERT INTO blob_chunks (blob, idx, chunk, off) VALUES (?, 1, ?, ?)`, h, row.Chunk, row.Off)
				}, []string{"blob"}
			},
		},
		{
			name:       "ErrCorrupt/ChunkListSwapped",
			data:       bytes.Repeat(randomBytes(4<<10, 3), 3<<9), // 6 MiB: three equal 2 MiB chunks
			lateDetect: true,
			spoil: func(t *testing.T, db *index.DB, s *cas.Store, h cas.Hash) (func(), []string) {
				other, err := s.PutBytes(context.Background(), nil, bytes.Repeat(randomBytes(4<<10, 4), 3<<9))
				require.NoError(t, err)
				l, lo := chunkList(t, db, h), chunkList(t, db, other)
				require.Len(t, l, 3)
				require.Len(t, lo, 3)
				exec(t, db, `UPDATE blob_chunks SET chunk = ? WHERE blob = ? AND idx = 1`, lo[0], h)
				return func() { exec(t, db, `UPDATE blob_chunks SET chunk = ? WHERE blob = ? AND idx = 1`, l[1], h) }, []string{"blob"}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, s := storetest.OpenCAS(t, cas.Options{})
			h, err := s.PutBytes(ctx, nil, tt.data)
			require.NoError(t, err)
			good := textBytes(1000, 99)
			gh, err := s.PutBytes(ctx, nil, good)
			require.NoError(t, err)

			mend, kinds := tt.spoil(t, db, s, h)

			b, err := s.ReadAll(ctx, h)
			assert.ErrorIs(t, err, cas.ErrCorrupt)
			assert.NotErrorIs(t, err, cas.ErrNotFound)
			assert.Nil(t, b, "ReadAll returns no bytes with the error")

			// Streaming may hand out verified chunks before it meets the
			// bad one; they must be the content's own bytes.
			var got []byte
			rc, err := s.Get(ctx, h)
			if err == nil {
				got, err = io.ReadAll(rc)
				require.NoError(t, rc.Close())
			}
			assert.ErrorIs(t, err, cas.ErrCorrupt)
			if tt.lateDetect {
				assert.Len(t, got, len(tt.data), "the error comes at the end, in place of EOF")
			} else {
				assert.True(t, bytes.HasPrefix(tt.data, got), "Get returned %d bytes that are not the content's", len(got))
				assert.Less(t, len(got), len(tt.data))
			}

			rep, err := s.Verify(ctx, nil)
			require.NoError(t, err)
			var gotKinds []string
			for _, p := range rep.Problems {
				gotKinds = append(gotKinds, p.Kind)
				assert.NotEmpty(t, p.Err)
				assert.NotEqual(t, gh, p.Hash, "the sound blob is not reported")
				if p.Kind == "blob" {
					assert.Equal(t, h, p.Hash)
				}
			}
			assert.ElementsMatch(t, kinds, gotKinds, "%v", rep.Problems)

			// The rest of the store still reads.
			b, err = s.ReadAll(ctx, gh)
			require.NoError(t, err)
			assert.Equal(t, good, b)

			mend()
			b, err = s.ReadAll(ctx, h)
			require.NoError(t, err, "mended")
			assert.True(t, bytes.Equal(tt.data, b))
		})
	}
}
