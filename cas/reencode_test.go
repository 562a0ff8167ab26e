package cas_test

import (
	"bytes"
	"context"
	"math/rand/v2"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// layout is what the scheme decided for each blob: its codec and base.
func layout(t *testing.T, db *index.DB) map[cas.Hash][2]any {
	t.Helper()
	var rows []struct {
		Hash  cas.Hash `db:"hash"`
		Codec int      `db:"codec"`
		Base  cas.Hash `db:"base"`
		Gen   int64    `db:"gen"`
	}
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		return tx.SelectContext(context.Background(), &rows, `SELECT hash, codec, base, gen FROM blobs`)
	}))
	m := map[cas.Hash][2]any{}
	for _, r := range rows {
		m[r.Hash] = [2]any{r.Codec, r.Base}
	}
	return m
}

// requireBounded reads every hash back and checks its chain against the
// bound.
func requireBounded(t *testing.T, s *cas.Store, want map[cas.Hash][]byte, bound int, step int) {
	t.Helper()
	ctx := context.Background()
	for h, b := range want {
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err, "step %d", step)
		require.True(t, bytes.Equal(b, got), "step %d", step)
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		require.LessOrEqual(t, info.Depth, bound, "step %d", step)
	}
}

// TestQueuedReencodingMatchesInline writes two files' histories, with
// returns to earlier versions, into a store that queues re-encoding and
// runs the queue a random few jobs at a time between writes, and into one
// that re-encodes inline. At every moment in between every version reads
// back within the chain bound; once the queue is empty, every blob is
// stored exactly as the inline store stores it.
// Without dictionaries every version a queued write stores is inserted,
// or found stored already, by one statement.
func TestQueuedReencodingMatchesInline(t *testing.T) {
	t.Run("Dictionaries", func(t *testing.T) { testQueuedMatchesInline(t, 0) })
	t.Run("NoDictionaries", func(t *testing.T) { testQueuedMatchesInline(t, -1) })
}

func testQueuedMatchesInline(t *testing.T, dictMax int) {
	ctx := context.Background()
	const bound = 4
	qdb, queued := storetest.OpenCAS(t, cas.Options{MaxChain: bound, DictMax: dictMax})
	idb, inline := storetest.OpenCAS(t, cas.Options{MaxChain: bound, InlineDeltas: true, DictMax: dictMax})
	r := rand.New(rand.NewPCG(5, 7))
	pools := [2][][]byte{draftHistory(60), textVersions(60)}
	var next [2]int
	var prev [2]cas.Hash
	want := map[cas.Hash][]byte{}
	for step := range 80 {
		f := r.IntN(2)
		var b []byte
		if next[f] > 3 && r.IntN(4) == 0 {
			b = pools[f][r.IntN(next[f])]
		} else if next[f] < len(pools[f]) {
			b = pools[f][next[f]]
			next[f]++
		} else {
			continue
		}
		h, err := queued.PutVersion(ctx, nil, b, prev[f])
		require.NoError(t, err)
		ih, err := inline.PutVersion(ctx, nil, b, prev[f])
		require.NoError(t, err)
		require.Equal(t, h, ih)
		prev[f], want[h] = h, b
		if step%10 == 0 {
			requireBounded(t, queued, want, bound, step)
		}
		_, err = queued.Reencode(ctx, r.IntN(3))
		require.NoError(t, err)
	}
	requireBounded(t, queued, want, bound, -1)
	_, err := queued.Reencode(ctx, 0)
	require.NoError(t, err)
	n, err := queued.PendingReencodes(ctx)
	require.NoError(t, err)
	assert.Zero(t, n)
	requireBounded(t, queued, want, bound, -1)
	assert.Equal(t, layout(t, idb), layout(t, qdb), "the queue leaves every blob as inline re-encoding does")
}

// textVersions is a second file's history: a note rewritten in place.
func textVersions(n int) [][]byte {
	out := make([][]byte, n)
	base := textBytes(6<<10, 11)
	for i := range out {
		b := bytes.Clone(base)
		copy(b[(i*97)%len(b):], []byte("an edit in the middle of the note"))
		base = b
		out[i] = b
	}
	return out
}

// TestQueueStaysBounded: with no background step at all, a write that
// finds more than MaxPending jobs queued runs the oldest itself, so the
// queue never holds more, and reads stay within the bound throughout.
func TestQueueStaysBounded(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{MaxPending: 3, MaxChain: 5})
	var prev cas.Hash
	want := map[cas.Hash][]byte{}
	for i, v := range draftHistory(40) {
		h, err := s.PutVersion(ctx, nil, v, prev)
		require.NoError(t, err)
		prev, want[h] = h, v
		n, err := s.PendingReencodes(ctx)
		require.NoError(t, err)
		require.LessOrEqual(t, n, 3, "write %d", i)
	}
	requireBounded(t, s, want, 5, 40)
	deltas := count(t, db, `SELECT count(*) FROM blobs WHERE codec = 3`)
	assert.GreaterOrEqual(t, deltas, 40-1-3-5, "every version but the queued ones and the history's open ones is a delta")
}

// TestReencodePlanGoesStale: a job is planned in a read transaction and
// stored in a write transaction after it. When the store changes in
// between (another process runs the same job; gc collects a version the
// plan read), the write transaction sees it: the job is done once, on
// the store as it is, and everything still reads within the bound.
func TestReencodePlanGoesStale(t *testing.T) {
	ctx := context.Background()
	versions := draftHistory(12)
	tests := []struct {
		name string
		// meanwhile changes the store while the 12th write's job is
		// planned; hashes are the versions, oldest first.
		meanwhile func(t *testing.T, db *index.DB, other *cas.Store, hashes []cas.Hash)
		gone      int // how many of the oldest versions meanwhile collects
		stale     int64
	}{
		{name: "AnotherProcessRanTheJob", gone: 0, meanwhile: func(t *testing.T, _ *index.DB, other *cas.Store, _ []cas.Hash) {
			n, err := other.Reencode(ctx, 0)
			require.NoError(t, err)
			require.Equal(t, 1, n)
		}},
		{name: "GCCollectedTheOlderVersions", gone: 10, stale: 1, meanwhile: func(t *testing.T, db *index.DB, _ *cas.Store, hashes []cas.Hash) {
			// versions 1 to 10, 8 and 10 among them, which the plan
			// read as open
			for _, h := range hashes[:10] {
				exec(t, db, `DELETE FROM blobs WHERE hash = ?`, h)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			db := storetest.OpenDB(t, index.Options{})
			st, faults := storagetest.NewFaulty(cas.NewSQLiteStorage())
			s, err := cas.New(db, cas.Options{Storage: st})
			require.NoError(t, err)
			other, err := cas.New(db, cas.Options{})
			require.NoError(t, err)
			hashes := make([]cas.Hash, len(versions))
			var prev cas.Hash
			for i, v := range versions {
				if hashes[i], err = s.PutVersion(ctx, nil, v, prev); err != nil {
					t.Fatal(err)
				}
				prev = hashes[i]
				if i < len(versions)-1 {
					_, err = s.Reencode(ctx, 0)
					require.NoError(t, err)
				}
			}
			var fired atomic.Bool
			faults.Add(storagetest.Fault{Method: storagetest.Version, When: func(c storagetest.Call) bool {
				if c.Hash == hashes[len(hashes)-1] && fired.CompareAndSwap(false, true) {
					tt.meanwhile(t, db, other, hashes)
				}
				return false
			}})
			_, err = s.Reencode(ctx, 0)
			require.NoError(t, err)
			require.True(t, fired.Load())
			assert.Equal(t, tt.stale, cas.StalePlans(s), "a plan the store moved past is made again in the write transaction")
			n, err := s.PendingReencodes(ctx)
			require.NoError(t, err)
			assert.Zero(t, n)

			want := map[cas.Hash][]byte{}
			for i, h := range hashes {
				if i >= tt.gone {
					want[h] = versions[i]
				}
			}
			requireBounded(t, s, want, 16, 12)
			newest, err := s.Stat(ctx, hashes[11])
			require.NoError(t, err)
			assert.NotEqual(t, cas.CodecDelta, newest.Codec, "the newest version is whole")
			older, err := s.Stat(ctx, hashes[10])
			require.NoError(t, err)
			assert.Equal(t, hashes[11], older.Base, "the job was done: version 11 rests on 12")
		})
	}
}

// TestQueuedWriteLeavesCompressionToItsJob: over the package's own
// storage a queued write of a small file stores it raw, compressing
// nothing; its job compresses it once, and reads are the same throughout.
func TestQueuedWriteLeavesCompressionToItsJob(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{})
	versions := draftHistory(3)
	h0, err := s.PutVersion(ctx, nil, versions[0], cas.Hash{})
	require.NoError(t, err)
	for i, v := range versions[1:] {
		before := cas.Compressions(s)
		h, err := s.PutVersion(ctx, nil, v, h0)
		require.NoError(t, err)
		assert.Zero(t, cas.Compressions(s)-before, "the write compresses nothing")
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		assert.Equal(t, cas.CodecRaw, info.Codec)
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		require.Equal(t, versions[i+1], got)

		before = cas.Compressions(s)
		n, err := s.Reencode(ctx, 0)
		require.NoError(t, err)
		require.Equal(t, 1, n)
		assert.Equal(t, int64(1), cas.Compressions(s)-before, "its job compresses it once")
		info, err = s.Stat(ctx, h)
		require.NoError(t, err)
		assert.Equal(t, cas.CodecZstd, info.Codec)
		got, err = s.ReadAll(ctx, h)
		require.NoError(t, err)
		require.Equal(t, versions[i+1], got)
		prevInfo, err := s.Stat(ctx, h0)
		require.NoError(t, err)
		assert.Equal(t, cas.CodecDelta, prevInfo.Codec)
		h0 = h
	}
}
