package cas_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// sizedStore holds one blob of every stored form, a listed dictionary and
// the blobs compressed with it.
type sizedStore struct {
	db                 *index.DB
	s                  *cas.Store
	raw, zstd, chunked cas.Hash
	dict               cas.DictInfo
	chunks             []cas.Hash
}

func newSizedStore(t *testing.T) *sizedStore {
	t.Helper()
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{InlineMax: 256 << 10, DictTrainAfter: -1})
	for i := range 60 {
		_, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
	}
	dict, ok, err := s.TrainDict(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	st := &sizedStore{db: db, s: s, dict: dict}
	st.raw, err = s.PutBytes(ctx, nil, randomBytes(3000, 1))
	require.NoError(t, err)
	st.zstd, err = s.PutBytes(ctx, nil, textBytes(100<<10, 1))
	require.NoError(t, err)
	st.chunked, err = s.PutBytes(ctx, nil, randomBytes(3<<20, 2))
	require.NoError(t, err)
	st.chunks = chunkList(t, db, st.chunked)
	require.Greater(t, len(st.chunks), 1)
	for h, codec := range map[cas.Hash]cas.Codec{st.raw: cas.CodecRaw, st.zstd: cas.CodecZstd, st.chunked: cas.CodecChunked} {
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		require.Equal(t, codec, info.Codec)
	}
	return st
}

func (st *sizedStore) int(t *testing.T, query string, args ...any) int64 {
	t.Helper()
	ctx := context.Background()
	var n int64
	require.NoError(t, st.db.View(ctx, func(tx *index.Tx) error { return tx.GetContext(ctx, &n, query, args...) }))
	return n
}

// TestVerifySizes: a size a row records for content that hashes to its
// address is compared with the content, and one that differs is reported
// once, as a Problem of the object with Size saying which size, what the
// row records and what the content says; nothing else is reported, and
// the sound store reports nothing.
func TestVerifySizes(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		// spoil edits one column and returns the SQL that mends it and
		// the one Problem Verify must report, Err left out.
		spoil func(t *testing.T, st *sizedStore) (mend func(), want cas.Problem)
	}{
		{"RawBlob/Size", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			return st.set(t, "blobs", "size", st.raw, 3001), cas.Problem{Kind: "blob", Hash: st.raw,
				Size: &cas.SizeMismatch{Field: "size", Recorded: 3001, Actual: 3000}}
		}},
		{"RawBlob/Stored", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			return st.set(t, "blobs", "stored", st.raw, 0), cas.Problem{Kind: "blob", Hash: st.raw,
				Size: &cas.SizeMismatch{Field: "stored", Recorded: 0, Actual: 3000}}
		}},
		{"ZstdBlob/Size", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			return st.set(t, "blobs", "size", st.zstd, 7), cas.Problem{Kind: "blob", Hash: st.zstd,
				Size: &cas.SizeMismatch{Field: "size", Recorded: 7, Actual: 100 << 10}}
		}},
		{"ZstdBlob/Stored", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			stored := st.int(t, `SELECT stored FROM blobs WHERE hash = ?`, st.zstd)
			return st.set(t, "blobs", "stored", st.zstd, stored*2), cas.Problem{Kind: "blob", Hash: st.zstd,
				Size: &cas.SizeMismatch{Field: "stored", Recorded: stored * 2, Actual: stored}}
		}},
		{"ChunkedBlob/Size", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			return st.set(t, "blobs", "size", st.chunked, 1<<40), cas.Problem{Kind: "blob", Hash: st.chunked,
				Size: &cas.SizeMismatch{Field: "size", Recorded: 1 << 40, Actual: 3 << 20}}
		}},
		{"ChunkedBlob/Stored", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			return st.set(t, "blobs", "stored", st.chunked, 9), cas.Problem{Kind: "blob", Hash: st.chunked,
				Size: &cas.SizeMismatch{Field: "stored", Recorded: 9, Actual: 0}}
		}},
		{"ChunkedBlob/Offset", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			last := len(st.chunks) - 1
			off := st.int(t, `SELECT off FROM blob_chunks WHERE blob = ? AND idx = ?`, st.chunked, last)
			exec(t, st.db, `UPDATE blob_chunks SET off = 3 WHERE blob = ? AND idx = ?`, st.chunked, last)
			return func() {
					exec(t, st.db, `UPDATE blob_chunks SET off = ? WHERE blob = ? AND idx = ?`, off, st.chunked, last)
				}, cas.Problem{Kind: "blob", Hash: st.chunked,
					Size: &cas.SizeMismatch{Field: "offset", Index: last, Recorded: 3, Actual: off}}
		}},
		{"Chunk/Size", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			c := st.chunks[1]
			size := st.int(t, `SELECT size FROM chunks WHERE hash = ?`, c)
			return st.set(t, "chunks", "size", c, size-1), cas.Problem{Kind: "chunk", Hash: c,
				Size: &cas.SizeMismatch{Field: "size", Recorded: size - 1, Actual: size}}
		}},
		{"Chunk/Stored", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			c := st.chunks[0]
			stored := st.int(t, `SELECT stored FROM chunks WHERE hash = ?`, c)
			return st.set(t, "chunks", "stored", c, stored+1), cas.Problem{Kind: "chunk", Hash: c,
				Size: &cas.SizeMismatch{Field: "stored", Recorded: stored + 1, Actual: stored}}
		}},
		{"Dict/ListedSize", func(t *testing.T, st *sizedStore) (func(), cas.Problem) {
			return st.set(t, "dicts", "size", st.dict.Hash, st.dict.Size+5), cas.Problem{Kind: "dict", Hash: st.dict.Hash,
				Size: &cas.SizeMismatch{Field: "size", Recorded: st.dict.Size + 5, Actual: st.dict.Size}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := newSizedStore(t)
			rep, err := st.s.Verify(ctx, nil)
			require.NoError(t, err)
			require.Empty(t, rep.Problems, "the sound store")

			mend, want := tt.spoil(t, st)
			rep, err = st.s.Verify(ctx, nil)
			require.NoError(t, err)
			require.Len(t, rep.Problems, 1, "%v", rep.Problems)
			got := rep.Problems[0]
			assert.Contains(t, got.Err, want.Kind+" records ")
			got.Err = ""
			assert.Equal(t, want, got)

			mend()
		})
	}
}

// set writes v into column of the row of table at h, and returns what
// puts the old value back.
func (st *sizedStore) set(t *testing.T, table, column string, h cas.Hash, v int64) func() {
	t.Helper()
	old := st.int(t, `SELECT `+column+` FROM `+table+` WHERE hash = ?`, h)
	exec(t, st.db, `UPDATE `+table+` SET `+column+` = ? WHERE hash = ?`, v, h)
	return func() { exec(t, st.db, `UPDATE `+table+` SET `+column+` = ? WHERE hash = ?`, old, h) }
}

// TestVerifyReadsEachObjectOnce: the size checks take no read of their
// own. Verify decompresses each zstd blob once (a dictionary once more,
// as it checks the listed ones) and reads each chunk once
// in the pass over the chunks and once for the blob listing it, as it did
// before it compared sizes.
func TestVerifyReadsEachObjectOnce(t *testing.T) {
	ctx := context.Background()
	st := newSizedStore(t)
	zstdBlobs := st.int(t, `SELECT count(*) FROM blobs WHERE codec = 1`)
	dicts := st.int(t, `SELECT count(*) FROM dicts`)
	chunks := st.int(t, `SELECT count(*) FROM chunks`)
	listed := st.int(t, `SELECT count(*) FROM blob_chunks`)
	require.Positive(t, zstdBlobs)

	decodes, chunkReads := cas.Decodes(st.s), cas.ChunkReads(st.s)
	rep, err := st.s.Verify(ctx, nil)
	require.NoError(t, err)
	require.Empty(t, rep.Problems)

	// A listed dictionary is read once more, to check it is one.
	assert.Equal(t, zstdBlobs+dicts, cas.Decodes(st.s)-decodes, "zstd blobs decompressed")
	assert.Equal(t, chunks+listed, cas.ChunkReads(st.s)-chunkReads, "chunk reads")
	t.Logf("%d zstd blobs and %d dictionary: %d decompressions; %d chunks listed %d times: %d chunk reads",
		zstdBlobs, dicts, cas.Decodes(st.s)-decodes, chunks, listed, cas.ChunkReads(st.s)-chunkReads)
}
