package remote_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"runtime"
	"runtime/debug"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
	"github.com/wsstore/wsstore/remote/s3fake"
	"github.com/wsstore/wsstore/wserr"
)

// TestHugePackIndexIsNotHeld: a pack whose last 4 bytes give an index
// length of 4 GiB, and one of 96 MiB whose length gives the whole pack,
// which anyone who can write to the bucket could put there, are passed
// over by Recover and by reclaim-remote (both read the index a pack ends
// with) after the one ranged GET of their last 64 KiB, with the heap
// growing by a few MiB. Before, the second was read whole into memory. The
// object store is moto, whose copy is in a process of its own.
func TestHugePackIndexIsNotHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("moves a 96 MiB pack")
	}
	testEnv(t)
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	m := s3fake.StartMoto(t)
	m.CreateBucket("wsstore-packtail")
	ctx := context.Background()
	a := newDevice(t, m.URL, "wsstore-packtail", remote.Options{})
	dev, err := remote.Device(ctx, a.db)
	require.NoError(t, err)

	small := binary.BigEndian.AppendUint32([]byte("a pack's objects"), 1<<32-1)
	putRaw(t, m.URL, "wsstore-packtail", "store/data/00/"+cas.Sum(small).String(), small)
	body := make([]byte, 96<<20)
	r := rand.New(rand.NewPCG(7, 8))
	for i := range body {
		body[i] = byte(r.Uint32())
	}
	binary.BigEndian.PutUint32(body[len(body)-4:], uint32(len(body)-4))
	putRaw(t, m.URL, "wsstore-packtail", "store/data/01/"+cas.Sum(body).String(), body)
	body = nil
	runtime.GC()

	recovered := storetest.LeastHeapGrowth(2, func() {
		n, err := a.st.Recover(ctx, a.db, []cas.Hash{cas.Sum([]byte("pushed by no one"))})
		require.NoError(t, err)
		assert.Zero(t, n)
	})
	reclaimed := storetest.LeastHeapGrowth(2, func() {
		st, err := a.st.Reclaim(ctx, a.db, dev, remote.ReclaimOptions{Grace: -1, DryRun: true})
		require.NoError(t, err)
		assert.Zero(t, st.Packs, "a pack whose end does not read is kept")
	})
	t.Logf("heap grew by at most %.1f MiB recovering, %.1f MiB reclaiming past a 96 MiB pack claiming to be all index",
		float64(recovered)/(1<<20), float64(reclaimed)/(1<<20))
	// Holding the pack takes 96 MiB.
	assert.Less(t, recovered, uint64(12<<20))
	assert.Less(t, reclaimed, uint64(12<<20))
}

// hugeChunkList returns an index object listing one chunked blob of n
// chunks, which no push writes past 65,536, and its key.
func hugeChunkList(n int) (string, []byte) {
	h := cas.Sum([]byte("x"))
	var b bytes.Buffer
	fmt.Fprintf(&b, `{"version":1,"objects":[{"kind":0,"hash":"%s","size":%d,"codec":%d,"off":0,"len":0,"chunks":[`, h, n, cas.CodecChunked)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"hash":"%s","off":%d}`, h, i)
	}
	b.WriteString(`]}]}`)
	return "index/" + cas.Sum(b.Bytes()).String(), b.Bytes()
}

// TestHugeIndexObjectIsNotHeld: an index object that hashes to its key
// and lists a chunked blob of more chunks than any push writes, of about
// 100 MB (past the longest index a push writes) and of about 25 MB
// (within it, the one entry past its bound), is damaged, read no further
// than the bound: a pull names it, Recover skips it and reclaim-remote
// refuses to remove anything, each with the heap growing by a few MiB.
// Before, each read it whole into memory and decoded it at once, the
// heap growing by more than the object. The object store is moto.
func TestHugeIndexObjectIsNotHeld(t *testing.T) {
	if testing.Short() {
		t.Skip("moves index objects of 100 and 25 MB")
	}
	testEnv(t)
	defer debug.SetGCPercent(debug.SetGCPercent(1))
	m := s3fake.StartMoto(t)
	for _, tc := range []struct {
		name   string
		chunks int
	}{{"PastTheIndexBound", 1_200_000}, {"PastTheEntryBound", 300_000}} {
		t.Run(tc.name, func(t *testing.T) {
			bucket := "wsstore-hugeindex-" + fmt.Sprint(tc.chunks)
			m.CreateBucket(bucket)
			ctx := context.Background()
			key, b := hugeChunkList(tc.chunks)
			size := len(b)
			putRaw(t, m.URL, bucket, "store/"+key, b)
			b = nil
			runtime.GC()
			a := newDevice(t, m.URL, bucket, remote.Options{})
			dev, err := remote.Device(ctx, a.db)
			require.NoError(t, err)

			pulled := storetest.LeastHeapGrowth(2, func() {
				st, err := a.st.Pull(ctx, a.db)
				require.NoError(t, err)
				assert.Equal(t, []string{key}, st.Damaged)
				assert.Zero(t, st.Objects)
			})
			recovered := storetest.LeastHeapGrowth(2, func() {
				n, err := a.st.Recover(ctx, a.db, []cas.Hash{cas.Sum([]byte("x"))})
				require.NoError(t, err)
				assert.Zero(t, n)
			})
			reclaimed := storetest.LeastHeapGrowth(2, func() {
				_, err := a.st.Reclaim(ctx, a.db, dev, remote.ReclaimOptions{Grace: -1, DryRun: true})
				assert.Equal(t, wserr.Corrupt, wserr.CodeOf(err), "%v", err)
			})
			t.Logf("index object of %.1f MB: heap grew by at most %.1f MiB pulling, %.1f MiB recovering, %.1f MiB reclaiming",
				float64(size)/1e6, float64(pulled)/(1<<20), float64(recovered)/(1<<20), float64(reclaimed)/(1<<20))
			// Holding it takes its size, decoding it 40 bytes a chunk more.
			for _, g := range []uint64{pulled, recovered, reclaimed} {
				assert.Less(t, g, uint64(size/2))
				assert.Less(t, g, uint64(12<<20))
			}
		})
	}
}

// TestLongChunkListsArePushedWithinTheIndexBound: a push lists at most
// 262,144 chunks in one index object, so five chunked blobs of 65,536
// chunks each go in two, which another device takes in whole; a chunked
// blob of 65,537 chunks, more than an index entry lists, is refused with
// workspace.size_limit_exceeded and left pending, the others pushed.
func TestLongChunkListsArePushedWithinTheIndexBound(t *testing.T) {
	if testing.Short() {
		t.Skip("records 400,000 chunks")
	}
	srv := fakeBucket(t)
	ctx := context.Background()
	a := newDevice(t, srv.URL, "bkt", remote.Options{})
	chunk := a.put(t, [][]byte{[]byte("one chunk, listed many times")})[0]
	list := func(n int) []cas.ChunkRef {
		refs := make([]cas.ChunkRef, n)
		for i := range refs {
			refs[i] = cas.ChunkRef{Hash: chunk, Off: int64(i)}
		}
		return refs
	}
	var blobs []cas.Hash
	require.NoError(t, a.db.Update(ctx, func(tx *index.Tx) error {
		for i := range 6 {
			n := 1 << 16
			if i == 5 {
				n++
			}
			h := cas.Sum(fmt.Appendf(nil, "a long file %d", i))
			blobs = append(blobs, h)
			o := cas.Object{Kind: cas.KindBlob, Hash: h, Size: int64(n), Codec: cas.CodecChunked, Chunks: list(n)}
			if err := a.st.Put(ctx, tx, o); err != nil {
				return err
			}
		}
		return nil
	}))
	st, err := a.st.Push(ctx, a.db)
	assert.Equal(t, wserr.SizeLimitExceeded, wserr.CodeOf(err), "%v", err)
	assert.Contains(t, fmt.Sprint(err), blobs[5].String())
	assert.Equal(t, 5, st.Chunked)
	assert.Equal(t, 1, st.Pending, "the longest list stays pending")

	var lists int
	for _, k := range srv.Keys("bkt", "store/index/") {
		b, ok := srv.Object("bkt", k)
		require.True(t, ok)
		var idx struct {
			Objects []struct {
				Chunks []json.RawMessage `json:"chunks"`
			} `json:"objects"`
		}
		require.NoError(t, json.Unmarshal(b, &idx))
		n := 0
		for _, o := range idx.Objects {
			n += len(o.Chunks)
		}
		if n > 1 {
			lists++
			assert.LessOrEqual(t, n, 1<<18, k)
		}
	}
	assert.Equal(t, 2, lists, "five lists of 65,536 chunks in two index objects")

	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	ps, err := b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	assert.Empty(t, ps.Damaged)
	require.NoError(t, b.db.View(ctx, func(tx *index.Tx) error {
		for _, h := range blobs[:5] {
			var o cas.Object
			require.NoError(t, b.st.Get(ctx, tx, cas.KindBlob, h, func(got cas.Object) error { o = got; return nil }))
			assert.Len(t, o.Chunks, 1<<16)
		}
		return nil
	}))
}
