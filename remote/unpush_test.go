package remote_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/remote"
)

// TestUnpushGoneCostsWhatIsGone: a store whose last segment is gone checks
// the packs it recorded against the object store; what it does about the
// packs gone (marking unpushed the objects it holds, counting those it
// does not) takes a few statements a page of gone packs, each finding its
// objects through an index of the objects by pack, never by reading every
// object: 300 packs gone of 301, beside a pack of 3,000 objects still
// there, take 8 statements; a chunked file whose chunks were in packs gone
// goes again, chunks and list, and another device reads it. Before, each gone pack took an UPDATE and a
// count, each reading every object the store records (601 statements).
func TestUnpushGoneCostsWhatIsGone(t *testing.T) {
	srv := fakeBucket(t)
	ctx := context.Background()
	var rec storetest.Statements
	db, err := index.Open(ctx, filepath.Join(t.TempDir(), "wsstore.db"), index.Options{Trace: rec.Trace})
	require.NoError(t, err)
	t.Cleanup(func() { db.Close() })
	st := openStorage(t, srv.URL, "bkt", "store", remote.Options{})
	blobs, err := cas.New(db, cas.Options{Storage: st, InlineMax: 4 << 10})
	require.NoError(t, err)
	a := &device{db: db, st: st, blobs: blobs}
	push := func(prefix string, n int) []string {
		t.Helper()
		files := make([][]byte, n)
		for i := range files {
			files[i] = fmt.Appendf(nil, "%s object %d", prefix, i)
		}
		a.put(t, files)
		before := srv.Keys("bkt", "store/data/")
		ps, err := st.Push(ctx, db)
		require.NoError(t, err)
		require.Equal(t, 1, ps.Packs)
		var added []string
		for _, k := range srv.Keys("bkt", "store/data/") {
			if !slices.Contains(before, k) {
				added = append(added, k)
			}
		}
		return added
	}
	push("kept", 3000) // a pack of many objects, still there
	var gone []string
	for p := range 300 {
		gone = append(gone, push(fmt.Sprintf("pack %d", p), 2)...)
		if p == 99 {
			// The objects of the first 100 are no longer held here.
			_, err = st.Evict(ctx, db)
			require.NoError(t, err)
		}
	}
	require.Len(t, gone, 300)
	// A chunked file, its chunks held here: they go again, and so does its
	// list after them.
	big := make([]byte, 5<<20)
	r := rand.New(rand.NewPCG(5, 6))
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	before := srv.Keys("bkt", "store/")
	bigHash := a.put(t, [][]byte{big})
	ps, err := st.Push(ctx, db)
	require.NoError(t, err)
	require.Equal(t, 1, ps.Chunked)
	chunks := ps.Objects
	for _, k := range srv.Keys("bkt", "store/") {
		if !slices.Contains(before, k) { // its packs and index objects
			srv.SetObject("bkt", k, nil)
		}
	}
	for _, k := range gone {
		srv.SetObject("bkt", k, nil)
	}
	var repush, lost int
	stmts := rec.Record(func() { repush, lost, err = st.UnpushGone(ctx, db) })
	require.NoError(t, err)
	assert.Equal(t, 400+chunks+1, repush, "the objects held, the chunked file's list")
	assert.Equal(t, 200, lost, "those not held")
	t.Logf("%d statements for 300 packs gone", len(stmts))
	assert.LessOrEqual(t, len(stmts), 16, "a few statements a page of packs, not some a pack")
	assert.NotZero(t, requireObjectsBy(t, db, stmts, "remote_objects_pack"))
	n, err := st.Pending(ctx, db)
	require.NoError(t, err)
	assert.Equal(t, 400+chunks+1, n, "the objects held are pushed again")
	_, err = st.Push(ctx, db)
	require.NoError(t, err)
	b := newDevice(t, srv.URL, "bkt", remote.Options{})
	_, err = b.st.Pull(ctx, b.db)
	require.NoError(t, err)
	b.requireAll(t, bigHash, [][]byte{big})
}
