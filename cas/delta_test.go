package cas_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// draftHistory returns n versions of a growing Markdown draft: each round
// appends a paragraph and now and then edits a line in the middle, as an
// agent's output/main.md evolves.
func draftHistory(n int) [][]byte {
	r := rand.New(rand.NewPCG(42, 42))
	words := strings.Fields("the keeper lit lamp at dusk and watched ships pass through fog while gulls cried over harbour stones night fell slowly")
	var doc []string
	out := make([][]byte, 0, n)
	for i := range n {
		var p strings.Builder
		for range 12 + r.IntN(12) {
			p.WriteString(words[r.IntN(len(words))])
			p.WriteByte(' ')
		}
		doc = append(doc, fmt.Sprintf("## %d\n\n%s\n", i, p.String()))
		if len(doc) > 3 && r.IntN(3) == 0 {
			j := r.IntN(len(doc) - 1)
			doc[j] = strings.Replace(doc[j], "the", "THE", 1)
		}
		out = append(out, []byte(strings.Join(doc, "\n")))
	}
	return out
}

// putVersion is PutVersion followed by the re-encoding it queued, so the
// test sees the store as the scheme leaves it after the write.
func putVersion(ctx context.Context, s *cas.Store, b []byte, prev cas.Hash) (cas.Hash, error) {
	h, err := s.PutVersion(ctx, nil, b, prev)
	if err == nil {
		_, err = s.Reencode(ctx, 0)
	}
	return h, err
}

func putHistory(t *testing.T, s *cas.Store, versions [][]byte) []cas.Hash {
	t.Helper()
	ctx := context.Background()
	var prev cas.Hash
	hashes := make([]cas.Hash, len(versions))
	for i, v := range versions {
		h, err := putVersion(ctx, s, v, prev)
		require.NoError(t, err)
		hashes[i], prev = h, h
	}
	return hashes
}

func TestDeltaHistoryReadsBackExactly(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	versions := draftHistory(500)
	hashes := putHistory(t, s, versions)

	var plain, stored int64
	maxDepth := 0
	for i, h := range hashes {
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		require.True(t, bytes.Equal(versions[i], got), "version %d", i)
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		assert.LessOrEqual(t, info.Depth, 16, "version %d", i)
		maxDepth = max(maxDepth, info.Depth)
		stored += info.Stored
		plain += info.Size
	}
	newest, err := s.Stat(ctx, hashes[len(hashes)-1])
	require.NoError(t, err)
	assert.Equal(t, cas.CodecZstd, newest.Codec, "the newest version is stored whole: reading it is a plain read")
	assert.Equal(t, 13, maxDepth, "bits(500) + popcount(500) - 2: the history's chains, well within 16")

	enc, err := zstd.NewWriter(nil, zstd.WithEncoderLevel(zstd.EncoderLevelFromZstd(3)), zstd.WithEncoderCRC(false))
	require.NoError(t, err)
	var whole int64
	for _, v := range versions {
		whole += int64(len(enc.EncodeAll(v, nil)))
	}
	t.Logf("500 versions: %d plain bytes, %d as separate zstd frames, %d stored with deltas (%.1fx smaller)", plain, whole, stored, float64(whole)/float64(stored))
	assert.Less(t, stored*100, whole, "deltas store the history at least 100x smaller than separate frames")
	var deltas int
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &deltas, `SELECT count(*) FROM blobs WHERE codec = 3`)
	}))
	assert.Equal(t, 499, deltas, "one history of 500 versions: only the newest is whole")
}

// TestDeltaLongHistoryNeedsFewWholeVersions: 2,000 versions of a growing
// log stay within the chain bound while only a history's newest version
// is whole, a new history starting every 766 versions (the first number
// whose chains would exceed 16).
func TestDeltaLongHistoryNeedsFewWholeVersions(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	var versions [][]byte
	log := []byte("# run log\n\nOne line per step, appended as the agent goes; nothing is ever cut.\n")
	for i := range 2000 {
		log = fmt.Appendf(log, "step %d: wrote %d bytes\n", i, i*37%1000)
		versions = append(versions, bytes.Clone(log))
	}
	hashes := putHistory(t, s, versions)
	for i, h := range hashes {
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		require.LessOrEqual(t, info.Depth, 16, "version %d", i)
	}
	for _, i := range []int{0, 765, 766, 1531, 1999} {
		got, err := s.ReadAll(ctx, hashes[i])
		require.NoError(t, err)
		require.True(t, bytes.Equal(versions[i], got), "version %d", i)
	}
	var wholes []int64
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.SelectContext(ctx, &wholes, `SELECT gen FROM blobs WHERE codec != 3 ORDER BY rowid`)
	}))
	assert.Equal(t, []int64{766, 766, 468}, wholes, "the newest versions of three histories: 766 + 766 + 468")
}

// TestDeltaRandomRevertsStayBoundedAndReadable mixes new versions with
// returns to earlier ones, the case where content-addressed versions
// could chain into cycles or past the bound.
func TestDeltaRandomRevertsStayBoundedAndReadable(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{MaxChain: 4})
	r := rand.New(rand.NewPCG(9, 9))
	pool := draftHistory(120)
	var seq [][]byte
	next := 0
	for range 400 {
		if next > 3 && r.IntN(3) == 0 {
			seq = append(seq, pool[r.IntN(next)])
		} else if next < len(pool) {
			seq = append(seq, pool[next])
			next++
		}
	}
	hashes := putHistory(t, s, seq)
	for i, h := range hashes {
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err, "write %d", i)
		require.True(t, bytes.Equal(seq[i], got), "write %d", i)
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		require.LessOrEqual(t, info.Depth, 4, "write %d", i)
	}
}

func TestDeltaChainBound(t *testing.T) {
	ctx := context.Background()
	// With the bound b, a history grows while bits(n) + popcount(n) - 2
	// stays within b, and every version of it is then at most b deep:
	// 60 versions make many histories whose chains reach the bound.
	for _, bound := range []int{1, 3, 5} {
		t.Run(fmt.Sprint(bound), func(t *testing.T) {
			_, s := storetest.OpenCAS(t, cas.Options{MaxChain: bound})
			hashes := putHistory(t, s, draftHistory(60))
			deepest := 0
			for _, h := range hashes {
				info, err := s.Stat(ctx, h)
				require.NoError(t, err)
				require.LessOrEqual(t, info.Depth, bound)
				deepest = max(deepest, info.Depth)
			}
			assert.Equal(t, bound, deepest)
		})
	}
}

func TestDeltaRevertsNeverCycle(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{})
	v := draftHistory(3)
	// a -> b -> a -> b -> c: every switch back re-uses an existing blob.
	seq := [][]byte{v[0], v[1], v[0], v[1], v[2], v[0]}
	hashes := putHistory(t, s, seq)
	for i, h := range hashes {
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(seq[i], got))
	}
}

func TestDeltaCorruptBaseIsDetected(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	s, err := cas.New(db, cas.Options{})
	require.NoError(t, err)
	versions := draftHistory(5)
	hashes := putHistory(t, s, versions)
	old, err := s.Stat(ctx, hashes[0])
	require.NoError(t, err)
	require.Equal(t, cas.CodecDelta, old.Codec)

	newest := hashes[len(hashes)-1]
	var data []byte
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &data, `SELECT data FROM blobs WHERE hash = ?`, newest)
	}))
	bad := bytes.Clone(data)
	bad[len(bad)/2] ^= 0x40
	setData := func(b []byte) {
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE blobs SET data = ? WHERE hash = ?`, b, newest)
			return err
		}))
	}
	setData(bad)
	for i, h := range hashes[:len(hashes)-1] {
		got, err := s.ReadAll(ctx, h)
		assert.ErrorIs(t, err, cas.ErrCorrupt, "version %d", i)
		assert.Nil(t, got)
		assert.Contains(t, err.Error(), newest.String(), "the error names the broken base")
	}
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, rep.Problems, len(hashes), "every version resting on the broken base is reported")
	setData(data)
}

func TestDeltaFallsBackWhenItDoesNotPay(t *testing.T) {
	ctx := context.Background()
	_, s := storetest.OpenCAS(t, cas.Options{})
	r := rand.New(rand.NewPCG(1, 2))
	a, b := make([]byte, 8000), make([]byte, 8000)
	for i := range a {
		a[i], b[i] = byte(r.Uint32()), byte(r.Uint32())
	}
	ha, err := putVersion(ctx, s, a, cas.Hash{})
	require.NoError(t, err)
	_, err = putVersion(ctx, s, b, ha)
	require.NoError(t, err)
	info, err := s.Stat(ctx, ha)
	require.NoError(t, err)
	assert.Equal(t, cas.CodecRaw, info.Codec, "unrelated content keeps its whole form")

	t.Run("Disabled", func(t *testing.T) {
		_, s := storetest.OpenCAS(t, cas.Options{DeltaMax: -1})
		hashes := putHistory(t, s, draftHistory(5))
		info, err := s.Stat(ctx, hashes[0])
		require.NoError(t, err)
		assert.Equal(t, cas.CodecZstd, info.Codec)
	})
}

// TestPutInTransactionSkipsStoredChunks: putting a large file again inside
// a caller's transaction, with one chunk's worth changed, stores only the
// new chunks and leaves the stored ones' data untouched.
func TestPutInTransactionSkipsStoredChunks(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	r := rand.New(rand.NewPCG(5, 5))
	big := make([]byte, 12<<20)
	for i := range big {
		big[i] = byte('a' + r.IntN(20))
	}
	put := func(b []byte) {
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := s.PutBytes(ctx, tx, b)
			return err
		}))
	}
	put(big)
	var chunks int
	count := func() int {
		require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
			return tx.GetContext(ctx, &chunks, `SELECT count(*) FROM chunks`)
		}))
		return chunks
	}
	before, compressed := count(), cas.Compressions(s)
	edited := bytes.Clone(big)
	copy(edited[6<<20:], "an edit in the middle")
	put(edited)
	added := count() - before
	assert.LessOrEqual(t, added, 2, "only the chunks around the edit are new")
	assert.Equal(t, int64(added), cas.Compressions(s)-compressed, "stored chunks are not compressed again")
}

// TestDeltaStoreReopenedWithSmallerChain: a store written with a long
// chain bound stays readable when opened with a shorter one.
func TestDeltaStoreReopenedWithSmallerChain(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	long, err := cas.New(db, cas.Options{MaxChain: 100})
	require.NoError(t, err)
	versions := draftHistory(60)
	hashes := putHistory(t, long, versions)
	short, err := cas.New(db, cas.Options{MaxChain: 2})
	require.NoError(t, err)
	for i, h := range hashes {
		got, err := short.ReadAll(ctx, h)
		require.NoError(t, err, "version %d", i)
		require.True(t, bytes.Equal(versions[i], got))
	}
}

// TestDeltaHistoryGoesOnPastABrokenVersion: when an older version the
// history must re-encode no longer reads, the new version is still stored
// and readable, the versions that did read are re-encoded, and the broken
// one is left for Verify to report rather than built on.
func TestDeltaHistoryGoesOnPastABrokenVersion(t *testing.T) {
	ctx := context.Background()
	db := storetest.OpenDB(t, index.Options{})
	s, err := cas.New(db, cas.Options{})
	require.NoError(t, err)
	versions := draftHistory(8)
	hashes := putHistory(t, s, versions[:7])
	// Version 6 is open (its parent, 8, is yet to come) and a delta
	// against version 7; damage it.
	info, err := s.Stat(ctx, hashes[5])
	require.NoError(t, err)
	require.Equal(t, cas.CodecDelta, info.Codec)
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE blobs SET data = x'00' || data WHERE hash = ?`, hashes[5])
		return err
	}))

	h8, err := putVersion(ctx, s, versions[7], hashes[6])
	require.NoError(t, err)
	for i, h := range []cas.Hash{h8, hashes[6]} {
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err, "version %d", 8-i)
		assert.True(t, bytes.Equal(versions[7-i], got))
	}
	seven, err := s.Stat(ctx, hashes[6])
	require.NoError(t, err)
	assert.Equal(t, h8, seven.Base, "version 7 rests on its parent, 8")
	_, err = s.ReadAll(ctx, hashes[5])
	assert.ErrorIs(t, err, cas.ErrCorrupt)
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.NotEmpty(t, rep.Problems)
	// Leave a sound store for the integrity check at cleanup.
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM blobs`)
		return err
	}))
}

// TestDeltaLegacyKeyframeStaysWhole: a whole version that chains of an
// earlier build's scheme end at (depth > 0, no history number) is not
// re-encoded, since its chains are not bounded by this scheme; the new
// version starts a history of its own, which then grows as usual.
func TestDeltaLegacyKeyframeStaysWhole(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	v := draftHistory(3)
	old, err := s.PutBytes(ctx, nil, v[0])
	require.NoError(t, err)
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `UPDATE blobs SET depth = 15 WHERE hash = ?`, old)
		return err
	}))
	h1, err := putVersion(ctx, s, v[1], old)
	require.NoError(t, err)
	h2, err := putVersion(ctx, s, v[2], h1)
	require.NoError(t, err)

	info, err := s.Stat(ctx, old)
	require.NoError(t, err)
	assert.Equal(t, cas.CodecZstd, info.Codec, "the legacy keyframe stays whole")
	info, err = s.Stat(ctx, h1)
	require.NoError(t, err)
	assert.Equal(t, cas.CodecDelta, info.Codec)
	assert.Equal(t, h2, info.Base, "the new history grows as usual")
}

// TestDeltaHistoryIgnoresAVersionThatLeftIt: an open version of one
// history is collected, and the same bytes come back as a version of
// another history. The first history must not take that row back (it
// would re-encode the other history's version and stretch its chains):
// it starts anew, and every chain of both stays within the bound.
func TestDeltaHistoryIgnoresAVersionThatLeftIt(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{MaxChain: 4})
	a := draftHistory(12)
	ha := putHistory(t, s, a[:7]) // version 7: versions 4 and 6 are open
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		// Collected: version 4, and the versions resting on it.
		_, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE hash IN (?, ?, ?, ?)`, ha[0], ha[1], ha[2], ha[3])
		return err
	}))
	// Another history stores version 4's bytes again, as its second
	// version, and goes on.
	b := [][]byte{[]byte(strings.Repeat("another file entirely\n", 20)), a[3]}
	for i := range 6 {
		b = append(b, append(bytes.Clone(a[3]), fmt.Appendf(nil, "\nmore of b %d\n", i)...))
	}
	hb := putHistory(t, s, b[:3])
	// Both histories go on, interleaved.
	prevA, prevB := ha[6], hb[2]
	all := map[cas.Hash][]byte{}
	for i, v := range a[:7] {
		all[ha[i]] = v
	}
	for i, v := range b[:3] {
		all[hb[i]] = v
	}
	ofA := map[cas.Hash]bool{}
	for _, h := range ha {
		ofA[h] = true
	}
	for i := range 5 {
		var err error
		prevA, err = putVersion(ctx, s, a[7+i], prevA)
		require.NoError(t, err)
		all[prevA], ofA[prevA] = a[7+i], true
		info, err := s.Stat(ctx, hb[1])
		require.NoError(t, err)
		require.False(t, ofA[info.Base], "write %d of a: b's version is not re-encoded against one of a's", i)
		prevB, err = putVersion(ctx, s, b[3+i], prevB)
		require.NoError(t, err)
		all[prevB] = b[3+i]
	}
	for h, want := range all {
		if ok, err := s.Has(ctx, h); err != nil || !ok {
			require.NoError(t, err)
			continue // collected above
		}
		got, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		assert.True(t, bytes.Equal(want, got))
		info, err := s.Stat(ctx, h)
		require.NoError(t, err)
		assert.LessOrEqual(t, info.Depth, 4)
	}
	// Leave a sound store for the integrity check at cleanup: the rows
	// resting on the deleted ones are unreadable.
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM blobs`)
		return err
	}))
}

// TestDeltaHistoryLeavesLittleRoomBehind: a history re-encodes each whole
// version as a delta when the next arrives; the new version takes the old
// one's row position, so the room the whole version leaves in the blob
// table's pages is filled again rather than left empty until a vacuum.
func TestDeltaHistoryLeavesLittleRoomBehind(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{})
	putHistory(t, s, draftHistory(300))
	var pages, unused int64
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT sum(pgsize), sum(unused) FROM dbstat WHERE name = 'blobs'`).Scan(&pages, &unused)
	}))
	t.Logf("blob table: %d bytes of pages, %d unused", pages, unused)
	assert.Less(t, unused*5, pages, "less than a fifth of the table's pages is empty room")
}

// TestDeltaNewVersionTakesItsPredecessorsRow: when a write re-encodes only
// the version it replaces, the new version is stored at that version's row
// position; when it re-encodes older open versions too, the new version
// goes after them, at the end of the table.
func TestDeltaNewVersionTakesItsPredecessorsRow(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{InlineDeltas: true})
	type row struct {
		Hash  cas.Hash `db:"hash"`
		Rowid int64    `db:"rowid"`
		Data  []byte   `db:"data"`
		Base  []byte   `db:"base"`
	}
	rows := func() map[cas.Hash]row {
		var rs []row
		require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
			return tx.SelectContext(ctx, &rs, `SELECT hash, rowid, data, base FROM blobs`)
		}))
		m := map[cas.Hash]row{}
		for _, r := range rs {
			m[r.Hash] = r
		}
		return m
	}
	versions := draftHistory(64)
	prev, err := s.PutBytes(ctx, nil, versions[0])
	require.NoError(t, err)
	took, after := 0, 0
	for i, v := range versions[1:] {
		before := rows()
		h, err := putVersion(ctx, s, v, prev)
		require.NoError(t, err)
		now := rows()
		var others int // older versions this write re-encoded
		var last int64
		for k, r := range before {
			last = max(last, r.Rowid)
			// An edit against the new version can keep its bytes: an
			// older version that is a prefix of both is the same edit of
			// either, and only its base changes.
			if k != prev && (!bytes.Equal(now[k].Data, r.Data) || !bytes.Equal(now[k].Base, r.Base)) {
				others++
			}
		}
		require.NotEqual(t, before[prev].Data, now[prev].Data, "version %d re-encodes the one it replaces", i+1)
		if others == 0 {
			took++
			assert.Equal(t, before[prev].Rowid, now[h].Rowid, "version %d", i+1)
		} else {
			after++
			assert.Greater(t, now[h].Rowid, last, "version %d", i+1)
		}
		prev = h
	}
	assert.Positive(t, took)
	assert.Positive(t, after)
}

// TestAppendedHistoryIsEdits: a file that only grows by appends keeps its
// older versions as edits (the prefix of the next version, no zstd frame),
// each read back exactly and verified; damage to an edit is corruption.
func TestAppendedHistoryIsEdits(t *testing.T) {
	ctx := context.Background()
	db, s := storetest.OpenCAS(t, cas.Options{InlineDeltas: true})
	var versions [][]byte
	var doc []byte
	for i := range 40 {
		doc = fmt.Appendf(bytes.Clone(doc), "## Part %d\n\nThe keeper lit the lamp at dusk, round %d, and watched the ships.\n", i, i)
		versions = append(versions, doc)
	}
	hashes := putHistory(t, s, versions)
	for i, h := range hashes {
		b, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		require.Equal(t, versions[i], b, "version %d", i)
	}
	var edits, zstdDeltas int
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		if err := tx.GetContext(ctx, &edits, `SELECT count(*) FROM blobs WHERE codec = 3 AND substr(data, 1, 4) = CAST(? AS BLOB)`, []byte("wsE\x01")); err != nil {
			return err
		}
		return tx.GetContext(ctx, &zstdDeltas, `SELECT count(*) FROM blobs WHERE codec = 3 AND substr(data, 1, 4) != CAST(? AS BLOB)`, []byte("wsE\x01"))
	}))
	assert.Equal(t, len(versions)-1, edits, "every version but the newest is an edit")
	assert.Zero(t, zstdDeltas)

	// An edit that no longer fits its base fails the read, never returns
	// other bytes, and so does a version whose chain runs through it
	// (version 5 rests on version 6: delta.go).
	var data []byte
	require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
		return tx.GetContext(ctx, &data, `SELECT data FROM blobs WHERE hash = ?`, hashes[5])
	}))
	setData := func(b []byte) {
		require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE blobs SET data = ? WHERE hash = ?`, b, hashes[5])
			return err
		}))
	}
	setData(append(bytes.Clone(data), 'x'))
	for _, i := range []int{5, 4} {
		b, err := s.ReadAll(ctx, hashes[i])
		assert.ErrorIs(t, err, cas.ErrCorrupt, "version %d", i+1)
		assert.Nil(t, b)
	}
	setData(data)
}
