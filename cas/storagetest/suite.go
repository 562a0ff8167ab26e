package storagetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
)

// Open returns a Storage to test and the index whose transactions it runs
// in, both new and empty. It closes them when t ends.
type Open func(t *testing.T) (*index.DB, cas.Storage)

// Run runs the conformance suite against the Storage open returns, one
// fresh instance per subtest. The subtests of an optional ability
// (HistoryStorage, Batcher, UsageStorage) run only when the
// implementation has it.
func Run(t *testing.T, open Open) {
	tests := []struct {
		name string
		fn   func(t *testing.T, e *env)
	}{
		{"PutGetHasStat", testPutGet},
		{"KindsApart", testKindsApart},
		{"IdempotentPut", testIdempotentPut},
		{"NotFound", testNotFound},
		{"Touch", testTouch},
		{"DeleteCutoff", testDeleteCutoff},
		{"DeleteKeepsListedChunk", testDeleteListedChunk},
		{"Iterate", testIterate},
		{"IterateDeletes", testIterateDeletes},
		{"IterateStops", testIterateStops},
		{"EmptyAndLarge", testEmptyAndLarge},
		{"Chunked", testChunked},
		{"Delta", testDelta},
		{"Rollback", testRollback},
		{"ConcurrentReaders", testConcurrentReaders},
		{"ContextCanceled", testCanceled},
		{"History", testHistory},
		{"HistoryRollback", testHistoryRollback},
		{"IterateSeesTx", testIterateSeesTx},
		{"DeleteKeepsChunkListedInTx", testDeleteChunkListedInTx},
		{"Gens", testGens},
		{"Batch", testBatch},
		{"Usage", testUsage},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db, st := open(t)
			tt.fn(t, &env{ctx: context.Background(), db: db, st: st})
		})
	}
}

type env struct {
	ctx context.Context
	db  *index.DB
	st  cas.Storage
}

// t0 is the created time of most objects the suite puts.
var t0 = time.Unix(1_700_000_000, 0)

func (e *env) update(t *testing.T, fn func(tx *index.Tx) error) {
	t.Helper()
	require.NoError(t, e.db.Update(e.ctx, fn))
}

func (e *env) view(t *testing.T, fn func(tx *index.Tx) error) {
	t.Helper()
	require.NoError(t, e.db.View(e.ctx, fn))
}

func (e *env) put(t *testing.T, objs ...cas.Object) {
	t.Helper()
	e.update(t, func(tx *index.Tx) error {
		for _, o := range objs {
			if err := e.st.Put(e.ctx, tx, o); err != nil {
				return fmt.Errorf("put %s %s: %w", o.Kind, o.Hash.Short(), err)
			}
		}
		return nil
	})
}

// get returns a copy of the object of kind at h, or Get's error.
func (e *env) get(t *testing.T, kind cas.Kind, h cas.Hash) (cas.Object, error) {
	t.Helper()
	var got cas.Object
	err := e.db.View(e.ctx, func(tx *index.Tx) error {
		return e.st.Get(e.ctx, tx, kind, h, func(o cas.Object) error {
			got = o
			got.Data = bytes.Clone(o.Data)
			return nil
		})
	})
	return got, err
}

func (e *env) stat(t *testing.T, kind cas.Kind, h cas.Hash) (cas.Object, error) {
	t.Helper()
	var o cas.Object
	err := e.db.View(e.ctx, func(tx *index.Tx) error {
		var err error
		o, err = e.st.Stat(e.ctx, tx, kind, h)
		return err
	})
	return o, err
}

func (e *env) has(t *testing.T, kind cas.Kind, h cas.Hash) bool {
	t.Helper()
	var ok bool
	e.view(t, func(tx *index.Tx) error {
		var err error
		ok, err = e.st.Has(e.ctx, tx, kind, h)
		return err
	})
	return ok
}

func (e *env) all(t *testing.T, kind cas.Kind) map[cas.Hash]cas.Object {
	t.Helper()
	seen := map[cas.Hash]cas.Object{}
	e.view(t, func(tx *index.Tx) error {
		return e.st.Iterate(e.ctx, tx, kind, func(o cas.Object) error {
			assert.NotContains(t, seen, o.Hash, "iterate yields each object once")
			seen[o.Hash] = o
			return nil
		})
	})
	return seen
}

// object returns a raw object of kind holding data, created at created.
func object(kind cas.Kind, data []byte, created time.Time) cas.Object {
	return cas.Object{Kind: kind, Hash: cas.Sum(data), Size: int64(len(data)), Stored: int64(len(data)),
		Codec: cas.CodecRaw, Data: data, Created: created}
}

func randomData(n int, seed uint64) []byte {
	r := rand.New(rand.NewPCG(seed, 0x5707))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(r.Uint32())
	}
	return b
}

// requireSame checks that got is want as stored; withData also compares
// Data, which Stat and Iterate leave out.
func requireSame(t *testing.T, want, got cas.Object, withData bool) {
	t.Helper()
	assert.Equal(t, want.Kind, got.Kind, "kind")
	assert.Equal(t, want.Hash, got.Hash, "hash")
	assert.Equal(t, want.Size, got.Size, "size")
	assert.Equal(t, want.Stored, got.Stored, "stored")
	assert.Equal(t, want.Codec, got.Codec, "codec")
	assert.Equal(t, want.Base, got.Base, "base")
	assert.True(t, want.Created.Equal(got.Created), "created %v, want %v", got.Created, want.Created)
	if withData {
		assert.True(t, bytes.Equal(want.Data, got.Data), "data (%d bytes, want %d)", len(got.Data), len(want.Data))
	} else {
		assert.Empty(t, got.Data, "data")
	}
}

func testPutGet(t *testing.T, e *env) {
	blob := object(cas.KindBlob, []byte("hello, storage"), t0)
	blob.Codec = cas.CodecZstd // opaque to storage: any codec's bytes
	chunk := object(cas.KindChunk, randomData(5000, 1), t0.Add(time.Minute))
	e.put(t, blob, chunk)
	for _, o := range []cas.Object{blob, chunk} {
		got, err := e.get(t, o.Kind, o.Hash)
		require.NoError(t, err)
		requireSame(t, o, got, true)
		assert.Nil(t, got.Chunks)
		assert.True(t, e.has(t, o.Kind, o.Hash))
		st, err := e.stat(t, o.Kind, o.Hash)
		require.NoError(t, err)
		requireSame(t, o, st, false)
	}
}

func testKindsApart(t *testing.T, e *env) {
	data := []byte("same bytes, two kinds")
	blob := object(cas.KindBlob, data, t0)
	e.put(t, blob)
	assert.False(t, e.has(t, cas.KindChunk, blob.Hash), "a blob is not a chunk")
	_, err := e.get(t, cas.KindChunk, blob.Hash)
	assert.ErrorIs(t, err, cas.ErrNotFound)
	chunk := object(cas.KindChunk, data, t0.Add(time.Hour))
	e.put(t, chunk)
	b, err := e.stat(t, cas.KindBlob, blob.Hash)
	require.NoError(t, err)
	requireSame(t, blob, b, false)
	c, err := e.stat(t, cas.KindChunk, chunk.Hash)
	require.NoError(t, err)
	requireSame(t, chunk, c, false)
}

func testIdempotentPut(t *testing.T, e *env) {
	for _, kind := range []cas.Kind{cas.KindBlob, cas.KindChunk} {
		t.Run(kind.String(), func(t *testing.T) {
			first := object(kind, []byte("first form of "+kind.String()), t0)
			e.put(t, first)
			again := first
			again.Data = []byte("another stored form")
			again.Stored = int64(len(again.Data))
			again.Codec = cas.CodecZstd
			later := t0.Add(time.Hour)
			again.Created = later
			e.put(t, again)
			got, err := e.get(t, kind, first.Hash)
			require.NoError(t, err)
			want := first
			want.Created = got.Created
			requireSame(t, want, got, true) // the first stored form stays
			assert.False(t, got.Created.Before(later.Add(-cas.TouchSlack)), "created raised to %v, is %v", later, got.Created)

			// An older time never lowers it.
			before := got.Created
			again.Created = t0.Add(-time.Hour)
			e.put(t, again)
			got, err = e.get(t, kind, first.Hash)
			require.NoError(t, err)
			assert.True(t, got.Created.Equal(before), "created %v, was %v", got.Created, before)
			assert.Len(t, e.all(t, kind), 1)
		})
	}
}

func testNotFound(t *testing.T, e *env) {
	h := cas.Sum([]byte("never stored"))
	for _, kind := range []cas.Kind{cas.KindBlob, cas.KindChunk} {
		_, err := e.get(t, kind, h)
		assert.ErrorIs(t, err, cas.ErrNotFound, "get %s", kind)
		_, err = e.stat(t, kind, h)
		assert.ErrorIs(t, err, cas.ErrNotFound, "stat %s", kind)
		assert.False(t, e.has(t, kind, h))
		e.update(t, func(tx *index.Tx) error {
			ok, err := e.st.Touch(e.ctx, tx, kind, h, t0)
			require.NoError(t, err)
			assert.False(t, ok, "touch reports no object")
			_, deleted, err := e.st.Delete(e.ctx, tx, kind, h, t0.Add(time.Hour))
			require.NoError(t, err)
			assert.False(t, deleted)
			return nil
		})
	}
}

func testTouch(t *testing.T, e *env) {
	o := object(cas.KindBlob, []byte("touch me"), t0)
	e.put(t, o)
	later := t0.Add(10 * time.Minute)
	e.update(t, func(tx *index.Tx) error {
		ok, err := e.st.Touch(e.ctx, tx, cas.KindBlob, o.Hash, later)
		require.NoError(t, err)
		assert.True(t, ok)
		return nil
	})
	got, err := e.stat(t, cas.KindBlob, o.Hash)
	require.NoError(t, err)
	assert.False(t, got.Created.Before(later.Add(-cas.TouchSlack)), "created %v after touch at %v", got.Created, later)
	assert.False(t, got.Created.After(later), "created %v after touch at %v", got.Created, later)
	// Touching with an older time never lowers it.
	e.update(t, func(tx *index.Tx) error {
		_, err := e.st.Touch(e.ctx, tx, cas.KindBlob, o.Hash, t0)
		return err
	})
	again, err := e.stat(t, cas.KindBlob, o.Hash)
	require.NoError(t, err)
	assert.True(t, again.Created.Equal(got.Created))
}

func testDeleteCutoff(t *testing.T, e *env) {
	for _, kind := range []cas.Kind{cas.KindBlob, cas.KindChunk} {
		t.Run(kind.String(), func(t *testing.T) {
			o := object(kind, randomData(300, uint64(kind)), t0)
			e.put(t, o)
			e.update(t, func(tx *index.Tx) error {
				_, deleted, err := e.st.Delete(e.ctx, tx, kind, o.Hash, t0)
				require.NoError(t, err)
				assert.False(t, deleted, "created at the cutoff: young")
				return nil
			})
			assert.True(t, e.has(t, kind, o.Hash))
			e.update(t, func(tx *index.Tx) error {
				stored, deleted, err := e.st.Delete(e.ctx, tx, kind, o.Hash, t0.Add(time.Nanosecond))
				require.NoError(t, err)
				assert.True(t, deleted, "created before the cutoff: old")
				assert.Equal(t, o.Stored, stored)
				return nil
			})
			assert.False(t, e.has(t, kind, o.Hash))
			_, err := e.get(t, kind, o.Hash)
			assert.ErrorIs(t, err, cas.ErrNotFound)
			assert.Empty(t, e.all(t, kind))
		})
	}
}

// chunked returns chunk objects for pieces and the chunked blob listing
// them in order.
func chunked(pieces [][]byte, created time.Time) ([]cas.Object, cas.Object) {
	var chunks []cas.Object
	var refs []cas.ChunkRef
	var whole []byte
	seen := map[cas.Hash]bool{}
	for _, p := range pieces {
		c := object(cas.KindChunk, p, created)
		if !seen[c.Hash] {
			seen[c.Hash] = true
			chunks = append(chunks, c)
		}
		refs = append(refs, cas.ChunkRef{Hash: c.Hash, Off: int64(len(whole)), Size: c.Size})
		whole = append(whole, p...)
	}
	blob := cas.Object{Kind: cas.KindBlob, Hash: cas.Sum(whole), Size: int64(len(whole)), Codec: cas.CodecChunked,
		Chunks: refs, Created: created}
	return chunks, blob
}

func testDeleteListedChunk(t *testing.T, e *env) {
	chunks, blob := chunked([][]byte{randomData(100, 1), randomData(200, 2)}, t0)
	e.put(t, append(chunks, blob)...)
	cutoff := t0.Add(time.Hour)
	e.update(t, func(tx *index.Tx) error {
		_, deleted, err := e.st.Delete(e.ctx, tx, cas.KindChunk, chunks[0].Hash, cutoff)
		require.NoError(t, err)
		assert.False(t, deleted, "a chunk a blob lists stays")
		return nil
	})
	e.update(t, func(tx *index.Tx) error {
		_, deleted, err := e.st.Delete(e.ctx, tx, cas.KindBlob, blob.Hash, cutoff)
		require.NoError(t, err)
		assert.True(t, deleted)
		return nil
	})
	assert.Len(t, e.all(t, cas.KindChunk), 2, "a blob goes without its chunks")
	e.update(t, func(tx *index.Tx) error {
		for _, c := range chunks {
			_, deleted, err := e.st.Delete(e.ctx, tx, cas.KindChunk, c.Hash, cutoff)
			require.NoError(t, err)
			assert.True(t, deleted, "a chunk no blob lists goes")
		}
		return nil
	})
	assert.Empty(t, e.all(t, cas.KindChunk))
}

func testIterate(t *testing.T, e *env) {
	// More than one page of any reasonable paging.
	const n = 1300
	want := map[cas.Kind]map[cas.Hash]cas.Object{cas.KindBlob: {}, cas.KindChunk: {}}
	var objs []cas.Object
	for i := range n {
		kind := cas.KindBlob
		if i%3 == 0 {
			kind = cas.KindChunk
		}
		o := object(kind, fmt.Appendf(nil, "object %d", i), t0.Add(time.Duration(i)*time.Second))
		objs = append(objs, o)
		want[kind][o.Hash] = o
	}
	e.put(t, objs...)
	for kind, w := range want {
		got := e.all(t, kind)
		require.Len(t, got, len(w), "%s objects", kind)
		for h, o := range w {
			g, ok := got[h]
			if assert.True(t, ok, "iterate misses %s %s", kind, h.Short()) {
				requireSame(t, o, g, false)
				assert.Nil(t, g.Chunks)
			}
		}
	}
	// An empty storage yields nothing and no error.
	e.update(t, func(tx *index.Tx) error {
		for _, o := range objs {
			if _, _, err := e.st.Delete(e.ctx, tx, o.Kind, o.Hash, t0.Add(time.Hour*24)); err != nil {
				return err
			}
		}
		return nil
	})
	assert.Empty(t, e.all(t, cas.KindBlob))
	assert.Empty(t, e.all(t, cas.KindChunk))
}

func testIterateDeletes(t *testing.T, e *env) {
	var objs []cas.Object
	for i := range 700 {
		objs = append(objs, object(cas.KindBlob, fmt.Appendf(nil, "doomed %d", i), t0))
	}
	e.put(t, objs...)
	visited := 0
	e.update(t, func(tx *index.Tx) error {
		return e.st.Iterate(e.ctx, tx, cas.KindBlob, func(o cas.Object) error {
			visited++
			_, deleted, err := e.st.Delete(e.ctx, tx, o.Kind, o.Hash, t0.Add(time.Second))
			if err == nil && !deleted {
				err = fmt.Errorf("%s not deleted", o.Hash.Short())
			}
			return err
		})
	})
	assert.Equal(t, len(objs), visited)
	assert.Empty(t, e.all(t, cas.KindBlob))
}

func testIterateStops(t *testing.T, e *env) {
	e.put(t, object(cas.KindBlob, []byte("a"), t0), object(cas.KindBlob, []byte("b"), t0))
	stop := errors.New("stop here")
	calls := 0
	err := e.db.View(e.ctx, func(tx *index.Tx) error {
		return e.st.Iterate(e.ctx, tx, cas.KindBlob, func(cas.Object) error {
			calls++
			return stop
		})
	})
	assert.ErrorIs(t, err, stop)
	assert.Equal(t, 1, calls)
}

func testEmptyAndLarge(t *testing.T, e *env) {
	empty := object(cas.KindBlob, []byte{}, t0)
	emptyChunk := object(cas.KindChunk, nil, t0)
	large := object(cas.KindBlob, randomData(9<<20, 9), t0)
	e.put(t, empty, emptyChunk, large)
	for _, o := range []cas.Object{empty, emptyChunk, large} {
		got, err := e.get(t, o.Kind, o.Hash)
		require.NoError(t, err)
		requireSame(t, o, got, true)
	}
}

func testChunked(t *testing.T, e *env) {
	a, b := randomData(1000, 1), randomData(3000, 2)
	chunks, blob := chunked([][]byte{a, b, a}, t0) // a is listed twice
	require.Len(t, chunks, 2)
	e.put(t, append(chunks, blob)...)
	check := func() {
		t.Helper()
		got, err := e.get(t, cas.KindBlob, blob.Hash)
		require.NoError(t, err)
		requireSame(t, blob, got, false)
		assert.Equal(t, blob.Chunks, got.Chunks, "get's chunk list")
		st, err := e.stat(t, cas.KindBlob, blob.Hash)
		require.NoError(t, err)
		assert.Equal(t, blob.Chunks, st.Chunks, "stat's chunk list")
		it := e.all(t, cas.KindBlob)[blob.Hash]
		assert.Equal(t, cas.CodecChunked, it.Codec)
		assert.Equal(t, blob.Size, it.Size)
	}
	check()
	// Putting it again neither lists its chunks twice nor fails.
	again := blob
	again.Created = t0.Add(time.Hour)
	e.put(t, again)
	got, err := e.get(t, cas.KindBlob, blob.Hash)
	require.NoError(t, err)
	assert.Equal(t, blob.Chunks, got.Chunks)
	assert.False(t, got.Created.Before(again.Created.Add(-cas.TouchSlack)))
}

func testDelta(t *testing.T, e *env) {
	base := object(cas.KindBlob, []byte("the base version"), t0)
	d := object(cas.KindBlob, []byte("a delta's stored bytes"), t0)
	d.Hash = cas.Sum([]byte("the newer version's plain bytes"))
	d.Size = 31
	d.Codec = cas.CodecDelta
	d.Base = base.Hash
	e.put(t, base, d)
	got, err := e.get(t, cas.KindBlob, d.Hash)
	require.NoError(t, err)
	requireSame(t, d, got, true)
	st, err := e.stat(t, cas.KindBlob, d.Hash)
	require.NoError(t, err)
	assert.Equal(t, base.Hash, st.Base)
}

func testRollback(t *testing.T, e *env) {
	kept := object(cas.KindBlob, []byte("kept"), t0)
	e.put(t, kept)
	chunks, blob := chunked([][]byte{randomData(100, 3), randomData(100, 4)}, t0)
	lost := object(cas.KindBlob, []byte("rolled back"), t0)
	abort := errors.New("abort")
	err := e.db.Update(e.ctx, func(tx *index.Tx) error {
		for _, o := range append(chunks, blob, lost) {
			require.NoError(t, e.st.Put(e.ctx, tx, o))
		}
		_, _, err := e.st.Delete(e.ctx, tx, cas.KindBlob, kept.Hash, t0.Add(time.Hour))
		require.NoError(t, err)
		ok, err := e.st.Has(e.ctx, tx, cas.KindBlob, lost.Hash)
		require.NoError(t, err)
		assert.True(t, ok, "the transaction sees its own put")
		return abort
	})
	require.ErrorIs(t, err, abort)
	assert.False(t, e.has(t, cas.KindBlob, lost.Hash), "a put rolls back with its transaction")
	assert.False(t, e.has(t, cas.KindBlob, blob.Hash))
	assert.Empty(t, e.all(t, cas.KindChunk))
	assert.True(t, e.has(t, cas.KindBlob, kept.Hash), "a delete rolls back with its transaction")
}

func testConcurrentReaders(t *testing.T, e *env) {
	var objs []cas.Object
	for i := range 40 {
		objs = append(objs, object(cas.KindBlob, randomData(2000+i, uint64(i)), t0))
	}
	e.put(t, objs...)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 100 {
				o := objs[(g*7+i)%len(objs)]
				err := e.db.View(e.ctx, func(tx *index.Tx) error {
					return e.st.Get(e.ctx, tx, cas.KindBlob, o.Hash, func(got cas.Object) error {
						if !bytes.Equal(got.Data, o.Data) {
							return fmt.Errorf("%s: wrong bytes", o.Hash.Short())
						}
						return nil
					})
				})
				if err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}
}

func testCanceled(t *testing.T, e *env) {
	o := object(cas.KindBlob, []byte("present"), t0)
	e.put(t, o)
	ctx, cancel := context.WithCancel(e.ctx)
	cancel()
	fresh := object(cas.KindBlob, []byte("not stored"), t0)
	e.update(t, func(tx *index.Tx) error {
		assert.ErrorIs(t, e.st.Put(ctx, tx, fresh), context.Canceled, "put")
		_, err := e.st.Touch(ctx, tx, cas.KindBlob, o.Hash, t0.Add(time.Hour))
		assert.ErrorIs(t, err, context.Canceled, "touch")
		_, _, err = e.st.Delete(ctx, tx, cas.KindBlob, o.Hash, t0.Add(time.Hour))
		assert.ErrorIs(t, err, context.Canceled, "delete")
		return nil
	})
	e.view(t, func(tx *index.Tx) error {
		called := false
		err := e.st.Get(ctx, tx, cas.KindBlob, o.Hash, func(cas.Object) error { called = true; return nil })
		assert.ErrorIs(t, err, context.Canceled, "get")
		assert.False(t, called, "get calls nothing once ctx is done")
		_, err = e.st.Has(ctx, tx, cas.KindBlob, o.Hash)
		assert.ErrorIs(t, err, context.Canceled, "has")
		_, err = e.st.Stat(ctx, tx, cas.KindBlob, o.Hash)
		assert.ErrorIs(t, err, context.Canceled, "stat")
		err = e.st.Iterate(ctx, tx, cas.KindBlob, func(cas.Object) error { called = true; return nil })
		assert.ErrorIs(t, err, context.Canceled, "iterate")
		assert.False(t, called, "iterate calls nothing once ctx is done")
		return nil
	})
	assert.False(t, e.has(t, cas.KindBlob, fresh.Hash))
	assert.True(t, e.has(t, cas.KindBlob, o.Hash))
}

func (e *env) history(t *testing.T) cas.HistoryStorage {
	t.Helper()
	hs, ok := e.st.(cas.HistoryStorage)
	if !ok {
		t.Skip("the storage has no history ability")
	}
	return hs
}

func (e *env) version(t *testing.T, hs cas.HistoryStorage, h cas.Hash) cas.Version {
	t.Helper()
	var v cas.Version
	e.view(t, func(tx *index.Tx) error {
		var err error
		v, err = hs.Version(e.ctx, tx, h)
		return err
	})
	return v
}

func testHistory(t *testing.T, e *env) {
	hs := e.history(t)
	old := object(cas.KindBlob, randomData(4000, 1), t0)
	newer := object(cas.KindBlob, randomData(4000, 2), t0.Add(time.Minute))
	e.put(t, old)

	v := e.version(t, hs, old.Hash)
	requireSame(t, old, v.Object, true)
	assert.Equal(t, cas.History{}, v.History, "a new blob belongs to no history")
	assert.Zero(t, v.Saved)
	e.view(t, func(tx *index.Tx) error {
		_, err := hs.Version(e.ctx, tx, newer.Hash)
		assert.ErrorIs(t, err, cas.ErrNotFound)
		return nil
	})

	// The old version is re-encoded against the new one, which takes the
	// position it leaves, and both get their numbers, in one transaction.
	delta := []byte("old as a delta")
	later := t0.Add(time.Hour)
	e.update(t, func(tx *index.Tx) error {
		v, err := hs.Version(e.ctx, tx, old.Hash)
		require.NoError(t, err)
		require.NoError(t, hs.Reencode(e.ctx, tx, old.Hash, cas.CodecDelta, newer.Hash, delta))
		require.NoError(t, hs.PutAt(e.ctx, tx, newer, v.Slot))
		require.NoError(t, hs.SetHistory(e.ctx, tx, old.Hash, cas.History{Gen: 1}, time.Time{}))
		return hs.SetHistory(e.ctx, tx, newer.Hash, cas.History{Gen: 2, Head: true, Opens: []cas.Hash{old.Hash}}, later)
	})
	v = e.version(t, hs, old.Hash)
	assert.Equal(t, cas.CodecDelta, v.Codec)
	assert.Equal(t, newer.Hash, v.Base)
	assert.Equal(t, delta, v.Data)
	assert.Equal(t, int64(len(delta)), v.Stored)
	assert.Equal(t, old.Stored-int64(len(delta)), v.Saved, "saved counts what the new form saves")
	assert.True(t, v.Created.Equal(old.Created), "re-encoding keeps the created time")
	assert.Equal(t, cas.History{Gen: 1}, v.History)
	got, err := e.get(t, cas.KindBlob, old.Hash)
	require.NoError(t, err)
	assert.Equal(t, delta, got.Data, "get sees the new form")

	n := e.version(t, hs, newer.Hash)
	requireSame(t, cas.Object{Kind: cas.KindBlob, Hash: newer.Hash, Size: newer.Size, Stored: newer.Stored,
		Codec: newer.Codec, Data: newer.Data, Created: later}, n.Object, true)
	assert.Equal(t, cas.History{Gen: 2, Head: true, Opens: []cas.Hash{old.Hash}}, n.History)
	assert.False(t, n.Unreadable)

	// A head with nothing open is still a head; a version that is no
	// longer the head lists nothing.
	e.update(t, func(tx *index.Tx) error {
		return hs.SetHistory(e.ctx, tx, newer.Hash, cas.History{Gen: 2, Head: true}, time.Time{})
	})
	n = e.version(t, hs, newer.Hash)
	assert.True(t, n.Head)
	assert.Empty(t, n.Opens)
	e.update(t, func(tx *index.Tx) error {
		return hs.SetHistory(e.ctx, tx, newer.Hash, cas.History{Gen: 2}, time.Time{})
	})
	n = e.version(t, hs, newer.Hash)
	assert.Equal(t, cas.History{Gen: 2}, n.History)
	assert.True(t, n.Created.Equal(later), "a zero time leaves created as it is")

	// Re-encoding whole again counts the bytes saved back down.
	e.update(t, func(tx *index.Tx) error {
		return hs.Reencode(e.ctx, tx, old.Hash, cas.CodecRaw, cas.Hash{}, old.Data)
	})
	v = e.version(t, hs, old.Hash)
	assert.Equal(t, cas.CodecRaw, v.Codec)
	assert.True(t, v.Base.IsZero())
	assert.Zero(t, v.Saved)
	assert.Equal(t, old.Data, v.Data)
}

func testHistoryRollback(t *testing.T, e *env) {
	hs := e.history(t)
	old := object(cas.KindBlob, randomData(4000, 1), t0)
	newer := object(cas.KindBlob, randomData(4000, 2), t0)
	e.put(t, old)
	abort := errors.New("abort")
	err := e.db.Update(e.ctx, func(tx *index.Tx) error {
		require.NoError(t, hs.Reencode(e.ctx, tx, old.Hash, cas.CodecDelta, newer.Hash, []byte("delta")))
		require.NoError(t, hs.PutAt(e.ctx, tx, newer, 0))
		require.NoError(t, hs.SetHistory(e.ctx, tx, newer.Hash, cas.History{Gen: 2, Head: true}, t0))
		return abort
	})
	require.ErrorIs(t, err, abort)
	v := e.version(t, hs, old.Hash)
	requireSame(t, old, v.Object, true)
	assert.Equal(t, cas.History{}, v.History)
	assert.False(t, e.has(t, cas.KindBlob, newer.Hash))
}

// testIterateSeesTx: Iterate sees exactly what tx sees, created times as
// raised, objects put and deleted in tx included; maintenance inventories
// with it.
func testIterateSeesTx(t *testing.T, e *env) {
	a := object(cas.KindBlob, []byte("a"), t0)
	b := object(cas.KindBlob, []byte("b"), t0)
	e.put(t, a, b)
	c := object(cas.KindBlob, []byte("c"), t0.Add(time.Minute))
	later := t0.Add(time.Hour)
	e.update(t, func(tx *index.Tx) error {
		require.NoError(t, e.st.Put(e.ctx, tx, c))
		_, err := e.st.Touch(e.ctx, tx, cas.KindBlob, a.Hash, later)
		require.NoError(t, err)
		_, deleted, err := e.st.Delete(e.ctx, tx, cas.KindBlob, b.Hash, t0.Add(time.Second))
		require.NoError(t, err)
		require.True(t, deleted)
		got := map[cas.Hash]time.Time{}
		require.NoError(t, e.st.Iterate(e.ctx, tx, cas.KindBlob, func(o cas.Object) error {
			got[o.Hash] = o.Created
			return nil
		}))
		require.Len(t, got, 2, "a and c, not b")
		assert.False(t, got[a.Hash].Before(later.Add(-cas.TouchSlack)), "a touched: created %v", got[a.Hash])
		assert.True(t, got[c.Hash].Equal(c.Created), "c created %v", got[c.Hash])
		return nil
	})
	all := e.all(t, cas.KindBlob)
	assert.Len(t, all, 2)
	assert.NotContains(t, all, b.Hash)
}

// testDeleteChunkListedInTx: the chunk rule holds for a blob put in the
// deleting transaction, and for a chunk two blobs list while either is
// stored.
func testDeleteChunkListedInTx(t *testing.T, e *env) {
	shared := randomData(100, 7)
	chunks, blob := chunked([][]byte{shared, randomData(100, 8)}, t0)
	e.put(t, chunks...)
	cutoff := t0.Add(time.Hour)
	e.update(t, func(tx *index.Tx) error {
		require.NoError(t, e.st.Put(e.ctx, tx, blob))
		for _, c := range chunks {
			_, deleted, err := e.st.Delete(e.ctx, tx, cas.KindChunk, c.Hash, cutoff)
			require.NoError(t, err)
			assert.False(t, deleted, "a chunk listed by a blob put in tx stays")
		}
		return nil
	})
	chunks2, other := chunked([][]byte{shared, randomData(100, 9)}, t0)
	e.put(t, append(chunks2[1:], other)...)
	e.update(t, func(tx *index.Tx) error {
		_, deleted, err := e.st.Delete(e.ctx, tx, cas.KindBlob, blob.Hash, cutoff)
		require.NoError(t, err)
		require.True(t, deleted)
		_, deleted, err = e.st.Delete(e.ctx, tx, cas.KindChunk, chunks[0].Hash, cutoff)
		require.NoError(t, err)
		assert.False(t, deleted, "the other blob still lists the shared chunk")
		_, deleted, err = e.st.Delete(e.ctx, tx, cas.KindChunk, chunks[1].Hash, cutoff)
		require.NoError(t, err)
		assert.True(t, deleted, "no blob lists it any more")
		return nil
	})
	assert.Len(t, e.all(t, cas.KindChunk), 2)
}

// testGens: the history numbers SetHistory records are what Gens lists,
// and only those.
func testGens(t *testing.T, e *env) {
	hs := e.history(t)
	old := object(cas.KindBlob, []byte("old version"), t0)
	head := object(cas.KindBlob, []byte("head version"), t0)
	none := object(cas.KindBlob, []byte("in no history"), t0)
	e.put(t, old, head, none)
	e.update(t, func(tx *index.Tx) error {
		require.NoError(t, hs.SetHistory(e.ctx, tx, old.Hash, cas.History{Gen: 1}, time.Time{}))
		return hs.SetHistory(e.ctx, tx, head.Hash, cas.History{Gen: 2, Head: true, Opens: []cas.Hash{old.Hash}}, time.Time{})
	})
	got := map[cas.Hash]int64{}
	e.view(t, func(tx *index.Tx) error {
		return hs.Gens(e.ctx, tx, func(h cas.Hash, gen int64) error {
			assert.NotContains(t, got, h, "gens lists each blob once")
			got[h] = gen
			return nil
		})
	})
	assert.Equal(t, map[cas.Hash]int64{old.Hash: 1, head.Hash: 2}, got)
	stop := errors.New("stop")
	err := e.db.View(e.ctx, func(tx *index.Tx) error {
		return hs.Gens(e.ctx, tx, func(cas.Hash, int64) error { return stop })
	})
	assert.ErrorIs(t, err, stop)
}

// testBatch: a Batch answers as the Storage's own methods do.
func testBatch(t *testing.T, e *env) {
	b, ok := e.st.(cas.Batcher)
	if !ok {
		t.Skip("the storage has no batch ability")
	}
	chunks, blob := chunked([][]byte{randomData(100, 1), randomData(100, 2)}, t0)
	raw := object(cas.KindBlob, []byte("raw"), t0)
	young := object(cas.KindBlob, []byte("young"), t0.Add(time.Hour))
	e.put(t, append(chunks, blob, raw, young)...)
	missing := cas.Sum([]byte("missing"))
	cutoff := t0.Add(time.Minute)
	e.update(t, func(tx *index.Tx) error {
		batch, err := b.Batch(e.ctx, tx)
		require.NoError(t, err)
		defer func() { assert.NoError(t, batch.Close()) }()
		for range 2 { // the second round reuses what the first set up
			for _, o := range append(chunks, blob, raw, young) {
				want, err := e.st.Stat(e.ctx, tx, o.Kind, o.Hash)
				require.NoError(t, err)
				got, err := batch.Stat(e.ctx, o.Kind, o.Hash)
				require.NoError(t, err)
				requireSame(t, want, got, false)
				assert.Equal(t, want.Chunks, got.Chunks)
			}
			_, err = batch.Stat(e.ctx, cas.KindChunk, missing)
			assert.ErrorIs(t, err, cas.ErrNotFound)
			gen, err := batch.Gen(e.ctx, raw.Hash)
			require.NoError(t, err)
			assert.Zero(t, gen)
			_, err = batch.Gen(e.ctx, missing)
			assert.ErrorIs(t, err, cas.ErrNotFound)
		}
		_, deleted, err := batch.Delete(e.ctx, cas.KindChunk, chunks[0].Hash, cutoff)
		require.NoError(t, err)
		assert.False(t, deleted, "a listed chunk stays")
		_, deleted, err = batch.Delete(e.ctx, cas.KindBlob, young.Hash, cutoff)
		require.NoError(t, err)
		assert.False(t, deleted, "a young blob stays")
		stored, deleted, err := batch.Delete(e.ctx, cas.KindBlob, raw.Hash, cutoff)
		require.NoError(t, err)
		assert.True(t, deleted)
		assert.Equal(t, raw.Stored, stored)
		return nil
	})
	assert.False(t, e.has(t, cas.KindBlob, raw.Hash))
	if hs, ok := e.st.(cas.HistoryStorage); ok {
		e.update(t, func(tx *index.Tx) error {
			return hs.SetHistory(e.ctx, tx, young.Hash, cas.History{Gen: 3, Head: true}, time.Time{})
		})
		e.view(t, func(tx *index.Tx) error {
			batch, err := b.Batch(e.ctx, tx)
			require.NoError(t, err)
			defer batch.Close()
			gen, err := batch.Gen(e.ctx, young.Hash)
			require.NoError(t, err)
			assert.Equal(t, int64(3), gen, "a read batch sees the history number")
			return nil
		})
	}
}

// testUsage: a UsageStorage's totals are the sums over what Iterate (and
// Version, for Saved) sees.
func testUsage(t *testing.T, e *env) {
	us, ok := e.st.(cas.UsageStorage)
	if !ok {
		t.Skip("the storage has no usage ability")
	}
	var empty cas.Usage
	e.view(t, func(tx *index.Tx) error {
		var err error
		empty, err = us.Usage(e.ctx, tx)
		return err
	})
	assert.Equal(t, cas.Usage{}, empty)
	chunks, blob := chunked([][]byte{randomData(100, 1), randomData(300, 2)}, t0)
	z := object(cas.KindBlob, []byte("zstd form"), t0)
	z.Codec = cas.CodecZstd
	objs := append(chunks, blob, z, object(cas.KindBlob, []byte("raw 1"), t0), object(cas.KindBlob, []byte("raw 22"), t0))
	e.put(t, objs...)
	if hs, ok := e.st.(cas.HistoryStorage); ok {
		e.update(t, func(tx *index.Tx) error {
			return hs.Reencode(e.ctx, tx, z.Hash, cas.CodecDelta, blob.Hash, []byte("d"))
		})
	}
	var got cas.Usage
	e.view(t, func(tx *index.Tx) error {
		var err error
		got, err = us.Usage(e.ctx, tx)
		return err
	})
	want := cas.Usage{Chunks: 2, ChunksStored: 400}
	want.ByCodec = []cas.CodecUsage{{Codec: cas.CodecRaw, Blobs: 2, Size: 11, Stored: 11}}
	if _, ok := e.st.(cas.HistoryStorage); ok {
		want.ByCodec = append(want.ByCodec, cas.CodecUsage{Codec: cas.CodecChunked, Blobs: 1, Size: 400},
			cas.CodecUsage{Codec: cas.CodecDelta, Blobs: 1, Size: z.Size, Stored: 1, Saved: z.Stored - 1})
	} else {
		want.ByCodec = append(want.ByCodec, cas.CodecUsage{Codec: cas.CodecZstd, Blobs: 1, Size: z.Size, Stored: z.Stored},
			cas.CodecUsage{Codec: cas.CodecChunked, Blobs: 1, Size: 400})
	}
	assert.Equal(t, want, got)
}
