package cas_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/wserr"
)

func TestNewOptions(t *testing.T) {
	tests := []struct {
		name string
		opts cas.Options
		ok   bool
	}{
		{name: "OK/Defaults", ok: true},
		{name: "OK/DefaultOptions", opts: cas.DefaultOptions(), ok: true},
		{name: "OK/Fastest", opts: cas.Options{Level: 1}, ok: true},
		{name: "OK/Best", opts: cas.Options{Level: 22}, ok: true},
		{name: "OK/SmallestInline", opts: cas.Options{InlineMax: 1 << 10}, ok: true},
		{name: "OK/LargestInline", opts: cas.Options{InlineMax: 64 << 20}, ok: true},
		{name: "InvalidOptions/NegativeLevel", opts: cas.Options{Level: -1}},
		{name: "InvalidOptions/LevelTooHigh", opts: cas.Options{Level: 23}},
		{name: "InvalidOptions/InlineTooSmall", opts: cas.Options{InlineMax: 1<<10 - 1}},
		{name: "InvalidOptions/InlineTooLarge", opts: cas.Options{InlineMax: 64<<20 + 1}},
		{name: "InvalidOptions/NegativeInline", opts: cas.Options{InlineMax: -1}},
	}
	db := storetest.OpenDB(t, index.Options{})
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := cas.New(db, tt.opts)
			if tt.ok {
				require.NoError(t, err)
				assert.Same(t, db, s.DB())
				return
			}
			require.Error(t, err)
			assert.Nil(t, s)
			assert.Equal(t, wserr.InvalidOptions, wserr.CodeOf(err))
		})
	}
}

// TestPutGet round-trips content of every size class through both Put and
// PutBytes, reading it back through Get and ReadAll.
func TestPutGet(t *testing.T) {
	ctx := context.Background()
	const small = 1 << 10 // InlineMax of the store with small rows
	tests := []struct {
		name      string
		inlineMax int
		data      []byte
		codec     cas.Codec
	}{
		{name: "Raw/Empty", data: nil, codec: cas.CodecRaw},
		{name: "Raw/OneByte", data: []byte{'x'}, codec: cas.CodecRaw},
		{name: "Raw/Random1000", data: randomBytes(1000, 1), codec: cas.CodecRaw},
		{name: "Zstd/Text100KiB", data: textBytes(100<<10, 1), codec: cas.CodecZstd},
		{name: "Zstd/Zeros1MiB", data: make([]byte, 1<<20), codec: cas.CodecZstd},
		{name: "Zstd/TextAtInlineMax", data: textBytes(4<<20, 2), codec: cas.CodecZstd},
		{name: "Chunked/TextOverInlineMax", data: textBytes(4<<20+1, 2), codec: cas.CodecChunked},
		{name: "Chunked/Random9MiB", data: randomBytes(9<<20, 3), codec: cas.CodecChunked},
		{name: "Chunked/Zeros9MiB", data: make([]byte, 9<<20), codec: cas.CodecChunked},
		{name: "Zstd/SmallInline/AtInlineMax", inlineMax: small, data: textBytes(small, 4), codec: cas.CodecZstd},
		{name: "Chunked/SmallInline/OverInlineMax", inlineMax: small, data: textBytes(small+1, 4), codec: cas.CodecChunked},
		{name: "Chunked/SmallInline/Text5000", inlineMax: small, data: textBytes(5000, 5), codec: cas.CodecChunked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, s := storetest.OpenCAS(t, cas.Options{InlineMax: tt.inlineMax})
			want := cas.Sum(tt.data)

			h, err := s.Put(ctx, bytes.NewReader(tt.data))
			require.NoError(t, err)
			assert.Equal(t, want, h)
			h, err = s.PutBytes(ctx, nil, tt.data)
			require.NoError(t, err)
			assert.Equal(t, want, h)

			ok, err := s.Has(ctx, h)
			require.NoError(t, err)
			assert.True(t, ok)

			got, err := s.ReadAll(ctx, h)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(tt.data, got), "ReadAll returns the content")

			rc, err := s.Get(ctx, h)
			require.NoError(t, err)
			var buf bytes.Buffer
			_, err = io.CopyBuffer(&buf, rc, make([]byte, 1000)) // odd size: reads straddle chunks
			require.NoError(t, err)
			require.NoError(t, rc.Close())
			assert.True(t, bytes.Equal(tt.data, buf.Bytes()), "Get streams the content")

			info, err := s.Stat(ctx, h)
			require.NoError(t, err)
			assert.Equal(t, h, info.Hash)
			assert.Equal(t, int64(len(tt.data)), info.Size)
			assert.Equal(t, tt.codec, info.Codec)
			assert.True(t, info.Base.IsZero())
			if tt.codec == cas.CodecChunked {
				assert.Positive(t, info.Chunks)
			} else {
				assert.Zero(t, info.Chunks)
			}
		})
	}
}

func TestGetReadAfterClose(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{InlineMax: 1 << 10})
	h, err := s.PutBytes(ctx, nil, textBytes(1<<20, 1))
	require.NoError(t, err)
	rc, err := s.Get(ctx, h)
	require.NoError(t, err)
	require.NoError(t, rc.Close())
	_, err = rc.Read(make([]byte, 10))
	assert.Error(t, err)
	assert.NotErrorIs(t, err, io.EOF)
}

func TestNotFound(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{})
	_, err := s.PutBytes(ctx, nil, []byte("present"))
	require.NoError(t, err)
	for name, h := range map[string]cas.Hash{
		"ErrNotFound/Absent": cas.Sum([]byte("absent")),
		"ErrNotFound/Zero":   {},
	} {
		t.Run(name, func(t *testing.T) {
			ok, err := s.Has(ctx, h)
			require.NoError(t, err)
			assert.False(t, ok)

			rc, err := s.Get(ctx, h)
			assert.ErrorIs(t, err, cas.ErrNotFound)
			assert.NotErrorIs(t, err, cas.ErrCorrupt)
			assert.Nil(t, rc)
			b, err := s.ReadAll(ctx, h)
			assert.ErrorIs(t, err, cas.ErrNotFound)
			assert.Nil(t, b)
			_, err = s.Stat(ctx, h)
			assert.ErrorIs(t, err, cas.ErrNotFound)
			assert.Equal(t, wserr.NotFound, wserr.CodeOf(err))
		})
	}
}

// TestDedup stores the same content several times, by Put and PutBytes, and
// counts rows: one blob, its chunks once.
func TestDedup(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name string
		data []byte
	}{
		{name: "OK/Empty", data: nil},
		{name: "OK/Small", data: []byte("hello, world\n")},
		{name: "OK/Text", data: textBytes(200<<10, 1)},
		{name: "OK/Chunked", data: randomBytes(10<<20, 1)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clock := time.Unix(1_700_000_000, 0)
			db, s := storetest.OpenCAS(t, cas.Options{Now: func() time.Time { return clock }})
			h, err := s.Put(ctx, bytes.NewReader(tt.data))
			require.NoError(t, err)
			blobs := count(t, db, `SELECT count(*) FROM blobs`)
			chunks := count(t, db, `SELECT count(*) FROM chunks`)
			refs := count(t, db, `SELECT count(*) FROM blob_chunks`)
			assert.Equal(t, 1, blobs)
			created := count(t, db, `SELECT created FROM blobs WHERE hash = ?`, h)

			for i := range 3 {
				clock = clock.Add(time.Hour)
				var again cas.Hash
				if i%2 == 0 {
					again, err = s.Put(ctx, bytes.NewReader(tt.data))
				} else {
					again, err = s.PutBytes(ctx, nil, tt.data)
				}
				require.NoError(t, err)
				assert.Equal(t, h, again)
			}
			assert.Equal(t, blobs, count(t, db, `SELECT count(*) FROM blobs`), "blob rows")
			assert.Equal(t, chunks, count(t, db, `SELECT count(*) FROM chunks`), "chunk rows")
			assert.Equal(t, refs, count(t, db, `SELECT count(*) FROM blob_chunks`), "chunk list rows")

			// A repeated Put refreshes the row's time, so a gc that
			// started before it keeps the blob.
			touched := count(t, db, `SELECT created FROM blobs WHERE hash = ?`, h)
			assert.Equal(t, clock.UnixNano(), int64(touched))
			assert.Greater(t, touched, created)
			if refs > 0 {
				assert.Equal(t, 0, count(t, db, `SELECT count(*) FROM chunks WHERE created <> ?`, clock.UnixNano()),
					"every chunk refreshed")
			}
		})
	}
}

// TestTouchLeavesAFreshRowAlone: Touch refreshes an old row's created time
// but leaves a row stored under a second ago as it is (rewriting it would
// write its whole content again), and reports a missing blob.
func TestTouchLeavesAFreshRowAlone(t *testing.T) {
	ctx := context.Background()
	clock := time.Unix(1_700_000_000, 0)
	db, s := storetest.OpenCAS(t, cas.Options{Now: func() time.Time { return clock }})
	h, err := s.PutBytes(ctx, nil, textBytes(64<<10, 2))
	require.NoError(t, err)
	created := func() int64 { return int64(count(t, db, `SELECT created FROM blobs WHERE hash = ?`, h)) }
	touch := func(h cas.Hash) (ok bool, err error) {
		err = db.Update(ctx, func(tx *index.Tx) error {
			ok, err = s.Touch(ctx, tx, h)
			return err
		})
		return ok, err
	}
	stored := clock.UnixNano()

	clock = clock.Add(900 * time.Millisecond)
	ok, err := touch(h)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, stored, created(), "stored under a second ago: left as it is")

	clock = clock.Add(time.Hour)
	ok, err = touch(h)
	require.NoError(t, err)
	assert.True(t, ok)
	assert.Equal(t, clock.UnixNano(), created(), "an older row is refreshed")

	ok, err = touch(cas.Sum([]byte("never stored")))
	assert.False(t, ok)
	assert.ErrorIs(t, err, cas.ErrNotFound)
}

// TestCodecChoice checks the stored form: zstd where it pays, raw where it
// does not, and that Stat reports it.
func TestCodecChoice(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name       string
		data       []byte
		codec      cas.Codec
		compressed bool // stored < size
	}{
		{name: "Raw/Random4KiB", data: randomBytes(4<<10, 1), codec: cas.CodecRaw},
		{name: "Raw/Random1MiB", data: randomBytes(1<<20, 2), codec: cas.CodecRaw},
		{name: "Raw/Tiny", data: []byte("abc"), codec: cas.CodecRaw},
		{name: "Zstd/Text4KiB", data: textBytes(4<<10, 1), codec: cas.CodecZstd, compressed: true},
		{name: "Zstd/Text1MiB", data: textBytes(1<<20, 2), codec: cas.CodecZstd, compressed: true},
		{name: "Chunked/Text", data: textBytes(12<<20, 3), codec: cas.CodecChunked, compressed: true},
		{name: "Chunked/Random", data: randomBytes(12<<20, 3), codec: cas.CodecChunked},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, s := storetest.OpenCAS(t, cas.Options{})
			h, err := s.PutBytes(ctx, nil, tt.data)
			require.NoError(t, err)
			info, err := s.Stat(ctx, h)
			require.NoError(t, err)
			assert.Equal(t, tt.codec, info.Codec)
			assert.Equal(t, int64(len(tt.data)), info.Size)
			if tt.compressed {
				assert.Less(t, info.Stored, info.Size/2, "text compresses at least 2:1")
			} else {
				assert.Equal(t, info.Size, info.Stored, "stored raw")
			}
			if tt.codec != cas.CodecChunked {
				assert.Equal(t, int(info.Stored), count(t, db, `SELECT length(data) FROM blobs WHERE hash = ?`, h))
				return
			}
			// Chunked: Stat adds up the chunk rows, each in the codec
			// that suits it.
			assert.Equal(t, info.Chunks, count(t, db, `SELECT count(*) FROM blob_chunks WHERE blob = ?`, h))
			assert.Equal(t, int(info.Stored), count(t, db, `SELECT sum(length(data)) FROM chunks`))
			assert.Equal(t, int(info.Size), count(t, db, `SELECT sum(size) FROM chunks`))
			want := int(cas.CodecRaw)
			if tt.compressed {
				want = int(cas.CodecZstd)
			}
			assert.Equal(t, info.Chunks, count(t, db, `SELECT count(*) FROM chunks WHERE codec = ?`, want))
			// 12 MiB in chunks of 256 KiB..4 MiB.
			assert.GreaterOrEqual(t, info.Chunks, 3)
			assert.LessOrEqual(t, info.Chunks, 48)
		})
	}
}

// TestStatChunkedCountsSharedChunksOnce stores content made of one chunk
// repeated: the blob lists the chunk many times but holds its bytes once.
func TestStatChunkedCountsSharedChunksOnce(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	h, err := s.PutBytes(ctx, nil, bytes.Repeat(randomBytes(4<<10, 1), 5<<10)) // 20 MiB
	require.NoError(t, err)
	info, err := s.Stat(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, int64(20<<20), info.Size)
	assert.Equal(t, count(t, db, `SELECT count(*) FROM blob_chunks WHERE blob = ?`, h), info.Chunks)
	assert.Less(t, count(t, db, `SELECT count(*) FROM chunks`), info.Chunks, "repeated chunks are stored once")
	assert.Equal(t, int(info.Stored), count(t, db, `SELECT sum(length(data)) FROM chunks`))
}

// chunkList returns the chunk addresses of a chunked blob, in order.
func chunkList(t *testing.T, db *index.DB, h cas.Hash) []cas.Hash {
	t.Helper()
	ctx := context.Background()
	var hs []cas.Hash
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &hs, `SELECT chunk FROM blob_chunks WHERE blob = ? ORDER BY idx`, h)
	}))
	return hs
}

// TestChunkDedup stores a large file, then a version of it with a local
// edit: content-defined chunking keeps every chunk away from the edit, so
// the second file adds only a few chunk rows.
func TestChunkDedup(t *testing.T) {
	ctx := context.Background()
	const size = 24 << 20
	base := randomBytes(size, 7)
	patch := randomBytes(1000, 8)
	mid := size / 2
	tests := []struct {
		name   string
		edited []byte
	}{
		{name: "Identical", edited: base},
		{name: "OverwriteMiddle", edited: slices.Concat(base[:mid], patch, base[mid+len(patch):])},
		{name: "InsertMiddle", edited: slices.Concat(base[:mid], patch, base[mid:])},
		{name: "DeleteMiddle", edited: slices.Concat(base[:mid], base[mid+len(patch):])},
		{name: "Prepend", edited: slices.Concat(patch, base)},
		{name: "Append", edited: slices.Concat(base, patch)},
		{name: "TruncateEnd", edited: base[:size-len(patch)]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, s := storetest.OpenCAS(t, cas.Options{})
			h1, err := s.Put(ctx, bytes.NewReader(base))
			require.NoError(t, err)
			before := count(t, db, `SELECT count(*) FROM chunks`)
			h2, err := s.Put(ctx, bytes.NewReader(tt.edited))
			require.NoError(t, err)
			added := count(t, db, `SELECT count(*) FROM chunks`) - before

			got, err := s.ReadAll(ctx, h2)
			require.NoError(t, err)
			require.True(t, bytes.Equal(tt.edited, got))

			l1, l2 := chunkList(t, db, h1), chunkList(t, db, h2)
			shared := 0
			for _, c := range l2 {
				if slices.Contains(l1, c) {
					shared++
				}
			}
			t.Logf("%d chunks, then %d: %d shared, %d rows added", len(l1), len(l2), shared, added)
			assert.GreaterOrEqual(t, len(l1), 8, "24 MiB spans many chunks")
			if tt.name == "Identical" {
				assert.Equal(t, h1, h2)
				assert.Zero(t, added)
				return
			}
			assert.NotEqual(t, h1, h2)
			assert.Positive(t, added)
			assert.LessOrEqual(t, added, 3, "an edit changes only the chunks around it")
			assert.GreaterOrEqual(t, shared, len(l2)-3)
		})
	}
}

// failingReader yields n bytes of r, then fails.
type failingReader struct {
	r   io.Reader
	n   int
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if f.n == 0 {
		return 0, f.err
	}
	if len(p) > f.n {
		p = p[:f.n]
	}
	n, err := f.r.Read(p)
	f.n -= n
	return n, err
}

// TestPutFails feeds Put readers that fail part way and contexts that end:
// the error reaches the caller and no blob row is written (the chunks
// written before the failure go too: TestAbandonedPutFreesItsChunks).
func TestPutFails(t *testing.T) {
	errRead := errors.New("disk on fire")
	tests := []struct {
		name   string
		r      io.Reader
		cancel bool
		err    error
	}{
		{name: "ErrRead/Immediately", r: &failingReader{err: errRead}, err: errRead},
		{name: "ErrRead/Inline", r: &failingReader{r: textReader(1), n: 100 << 10, err: errRead}, err: errRead},
		{name: "ErrRead/Chunked", r: &failingReader{r: randomReader(1), n: 13 << 20, err: errRead}, err: errRead},
		// A stream cut short (base64, multipart) fails with the error
		// io.ReadFull uses for a short read: it is not the content's end.
		{name: "ErrUnexpectedEOF/Inline", r: &failingReader{r: textReader(1), n: 100 << 10, err: io.ErrUnexpectedEOF}, err: io.ErrUnexpectedEOF},
		{name: "ErrUnexpectedEOF/Immediately", r: &failingReader{err: io.ErrUnexpectedEOF}, err: io.ErrUnexpectedEOF},
		{name: "ErrCanceled/Inline", r: io.LimitReader(textReader(2), 1000), cancel: true, err: context.Canceled},
		{name: "ErrCanceled/Chunked", r: randomReader(2), cancel: true, err: context.Canceled}, // endless
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, s := storetest.OpenCAS(t, cas.Options{})
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			if tt.cancel {
				cancel()
			}
			h, err := s.Put(ctx, tt.r)
			require.Error(t, err)
			assert.ErrorIs(t, err, tt.err)
			assert.True(t, h.IsZero())
			assert.Zero(t, count(t, db, `SELECT count(*) FROM blobs`), "no blob row")
			assert.Zero(t, count(t, db, `SELECT count(*) FROM blob_chunks`), "no chunk list")
		})
	}
}

// TestPutBytesInTx writes blobs inside a caller's transaction: they commit
// with it and vanish with its rollback.
func TestPutBytesInTx(t *testing.T) {
	ctx := context.Background()
	errFail := errors.New("later step failed")
	tests := []struct {
		name string
		data []byte
		fail bool
	}{
		{name: "Committed/Inline", data: textBytes(10<<10, 1)},
		{name: "Committed/Chunked", data: randomBytes(9<<20, 1)},
		{name: "RolledBack/Inline", data: textBytes(10<<10, 2), fail: true},
		{name: "RolledBack/Chunked", data: randomBytes(9<<20, 2), fail: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, s := storetest.OpenCAS(t, cas.Options{})
			var h cas.Hash
			err := db.Update(ctx, func(tx *index.Tx) error {
				var err error
				h, err = s.PutBytes(ctx, tx, tt.data)
				if err != nil {
					return err
				}
				if tt.fail {
					return errFail
				}
				return nil
			})
			assert.Equal(t, cas.Sum(tt.data), h)
			ok, herr := s.Has(ctx, h)
			require.NoError(t, herr)
			if tt.fail {
				assert.ErrorIs(t, err, errFail)
				assert.False(t, ok)
				assert.Zero(t, count(t, db, `SELECT count(*) FROM chunks`), "chunks roll back too")
				return
			}
			require.NoError(t, err)
			assert.True(t, ok)
			got, err := s.ReadAll(ctx, h)
			require.NoError(t, err)
			assert.True(t, bytes.Equal(tt.data, got))
		})
	}
}

func TestVerify(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	for i := range 3 {
		_, err := s.PutBytes(ctx, nil, textBytes(1000, uint64(i)))
		require.NoError(t, err)
	}
	_, err := s.PutBytes(ctx, nil, randomBytes(9<<20, 1))
	require.NoError(t, err)
	chunks := count(t, db, `SELECT count(*) FROM chunks`)
	require.Positive(t, chunks)

	t.Run("OK", func(t *testing.T) {
		var calls []int
		rep, err := s.Verify(ctx, func(done, total int) {
			assert.Equal(t, 4+chunks, total)
			calls = append(calls, done)
		})
		require.NoError(t, err)
		assert.Empty(t, rep.Problems)
		assert.Equal(t, 4, rep.Blobs)
		assert.Equal(t, chunks, rep.Chunks)
		require.Len(t, calls, 4+chunks)
		for i, d := range calls {
			assert.Equal(t, i+1, d)
		}
	})
	t.Run("ErrCanceled", func(t *testing.T) {
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		_, err := s.Verify(cctx, nil)
		assert.ErrorIs(t, err, context.Canceled)
	})
}

// TestSyncFull runs the store on a database that makes every commit
// durable before it returns.
func TestSyncFull(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{Synchronous: index.SyncFull})
	s, err := cas.New(db, cas.Options{})
	require.NoError(t, err)
	data := textBytes(5<<20, 1)
	h, err := s.Put(ctx, bytes.NewReader(data))
	require.NoError(t, err)
	got, err := s.ReadAll(ctx, h)
	require.NoError(t, err)
	assert.True(t, bytes.Equal(data, got))
}
