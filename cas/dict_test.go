package cas_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
)

// dictWords is the vocabulary of the small-file corpus: prose and
// pseudo-code over a few hundred words, as an agent's notes and a source
// tree share them.
var dictWords = strings.Fields(`the of and to in is that for it as was with be by on not he this are or his
from at which but have an had they you were their one all we can her has there been if more when will
river castle lantern forest merchant sword harbor winter signal archive garden tower shadow letter market
bridge engine window marble silver thunder compass orchard library painter captain village mirror ribbon
anchor cellar meadow quiet bright hollow ancient restless gentle crooked golden narrow distant hidden
broken patient vivid stubborn curious walks returns whispers builds forgets carries opens watches follows
remembers gathers breaks answers waits counts burns buffer config handler request response context index
record stream parser token schema cursor worker channel session value error result option client server
packet header module vector matrix filter sorter reader writer tracker load store fetch merge split flush
retry parse render encode decode commit resolve update delete insert north south east west morning evening`)

// smallFile returns file i of the corpus: a note or a pseudo-source file
// of 300 B to 6 KiB.
func smallFile(i int) []byte { return smallFileOf(i, dictWords) }

// laterWords is the vocabulary of a store whose content has drifted since
// its first dictionary was trained.
var laterWords = strings.Fields(`a so up out if about who get which go me when make can like time no just him
know take people into year your good some could them see other than then now look only come its over think
also back after use two how our work first well way even new want because any these give day most us ledger
voyage quarry beacon tundra falcon glacier spindle pewter saffron lattice furnace parlor tavern caravan
migrate stitch harvest kindle scatter weave polish mend render commit rebase shard lease ticket replica`)

// smallFileOf is smallFile i written with the words of vocab.
func smallFileOf(i int, vocab []string) []byte {
	r := rand.New(rand.NewPCG(7, uint64(i)))
	w := func() string { return vocab[r.IntN(len(vocab))] }
	var b bytes.Buffer
	size := 300 + r.IntN(6<<10)
	if i%2 == 0 {
		fmt.Fprintf(&b, "# Note %d: %s %s\n\n", i, w(), w())
		for b.Len() < size {
			for range 8 + r.IntN(10) {
				b.WriteString(w() + " ")
			}
			b.WriteString(".\n")
		}
		return b.Bytes()
	}
	fmt.Fprintf(&b, "// Package %s %s %s.\npackage %s\n\n", w(), w(), w(), w())
	for b.Len() < size {
		fmt.Fprintf(&b, "func %s%s(%s int, %s string) (%s, error) {\n", w(), strings.Title(w()), w(), w(), w())
		fmt.Fprintf(&b, "\tif %s != nil {\n\t\treturn %s, %s\n\t}\n", w(), w(), w())
		fmt.Fprintf(&b, "\t%s.%s(%q)\n\treturn %s, nil\n}\n\n", w(), w(), w()+" "+w(), w())
	}
	return b.Bytes()
}

func newDictStore(t *testing.T, opts cas.Options) (*cas.Store, *index.DB) {
	t.Helper()
	db := storetest.OpenDB(t, index.Options{})
	s, err := cas.New(db, opts)
	require.NoError(t, err)
	return s, db
}

// storedBytes totals what the blobs hold as stored, dictionaries included.
func storedBytes(t *testing.T, s *cas.Store, db *index.DB) int64 {
	t.Helper()
	var n int64
	require.NoError(t, db.View(context.Background(), func(tx *index.Tx) error {
		u, err := s.Usage(context.Background(), tx)
		for _, c := range u.ByCodec {
			n += c.Stored
		}
		return err
	}))
	return n
}

// TestDictRoundTrip: once enough small blobs are stored, a dictionary is
// trained on its own; later small blobs are compressed with it, name it as
// their base, and every blob reads back exactly and verifies.
func TestDictRoundTrip(t *testing.T) {
	ctx := context.Background()
	s, _ := newDictStore(t, cas.Options{DictTrainAfter: 32})
	var hs []cas.Hash
	for i := range 200 {
		h, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
		hs = append(hs, h)
	}
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, ds, "a dictionary was trained")
	newest := ds[len(ds)-1]
	assert.Equal(t, int64(1), ds[0].ID)
	assert.LessOrEqual(t, newest.Size, int64(64<<10))

	info, err := s.Stat(ctx, hs[len(hs)-1])
	require.NoError(t, err)
	assert.Equal(t, cas.CodecZstd, info.Codec)
	assert.Equal(t, newest.Hash, info.Base, "a new small blob uses the newest dictionary")

	// The blobs stored before the first dictionary that it was trained
	// from are re-encoded with it.
	info, err = s.Stat(ctx, hs[0])
	require.NoError(t, err)
	assert.Equal(t, ds[0].Hash, info.Base)

	for i, h := range hs {
		b, err := s.ReadAll(ctx, h)
		require.NoError(t, err)
		require.Equal(t, smallFile(i), b)
	}
	// A store opened afresh on the same database (a new process) reads
	// them through its own decoder, and uses the same dictionary.
	s2, err := cas.New(s.DB(), cas.Options{DictTrainAfter: 32})
	require.NoError(t, err)
	for i, h := range hs {
		b, err := s2.ReadAll(ctx, h)
		require.NoError(t, err)
		require.Equal(t, smallFile(i), b)
	}
	h, err := s2.PutBytes(ctx, nil, smallFile(1000))
	require.NoError(t, err)
	info, err = s2.Stat(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, newest.Hash, info.Base, "another Store picks up the listed dictionary")

	rep, err := s2.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	assert.Equal(t, len(ds), rep.Dicts)
	// A version history over dictionary-compressed versions still reads.
	prev := hs[10]
	cur := smallFile(10)
	for n := range 20 {
		cur = append(cur, fmt.Sprintf("line %d added to the note\n", n)...)
		prev, err = s2.PutVersion(ctx, nil, cur, prev)
		require.NoError(t, err)
	}
	b, err := s2.ReadAll(ctx, hs[10])
	require.NoError(t, err)
	assert.Equal(t, smallFile(10), b)
	rep, err = s2.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// TestDictSavesBytes counts the bytes a dictionary saves on a corpus of
// small text files against the same files compressed one by one.
func TestDictSavesBytes(t *testing.T) {
	ctx := context.Background()
	plain, pdb := newDictStore(t, cas.Options{DictMax: -1})
	dict, ddb := newDictStore(t, cas.Options{})
	var total int64
	for i := range 600 {
		b := smallFile(i)
		total += int64(len(b))
		_, err := plain.PutBytes(ctx, nil, b)
		require.NoError(t, err)
		_, err = dict.PutBytes(ctx, nil, b)
		require.NoError(t, err)
	}
	ds, err := dict.Dicts(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, ds)
	p, d := storedBytes(t, plain, pdb), storedBytes(t, dict, ddb)
	t.Logf("%d files, %d bytes: one by one %d (%.2f×), with %d dictionaries %d (%.2f×, dictionaries included)",
		600, total, p, float64(total)/float64(p), len(ds), d, float64(total)/float64(d))
	assert.Less(t, d, p*85/100, "the dictionary saves at least 15%% of the stored bytes")
	nodicts, err := plain.Dicts(ctx)
	require.NoError(t, err)
	assert.Empty(t, nodicts, "a store with dictionaries off trains none")
}

// TestDictNotTrainedWhenItDoesNotPay: random bytes share nothing, so no
// dictionary is kept.
func TestDictNotTrainedWhenItDoesNotPay(t *testing.T) {
	ctx := context.Background()
	s, _ := newDictStore(t, cas.Options{DictTrainAfter: 16})
	r := rand.New(rand.NewPCG(1, 1))
	for range 100 {
		b := make([]byte, 2000)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		_, err := s.PutBytes(ctx, nil, b)
		require.NoError(t, err)
	}
	_, ok, err := s.TrainDict(ctx)
	require.NoError(t, err)
	assert.False(t, ok)
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	assert.Empty(t, ds)
}

// TestDictTrainingIsAtomic: a training runs in the transaction of the
// write that made it due, so when that transaction rolls back neither the
// dictionary, its row nor any re-encoding remains, and the Store goes on
// without it.
func TestDictTrainingIsAtomic(t *testing.T) {
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{DictTrainAfter: 40})
	for i := range 39 {
		_, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
	}
	before := storedBytes(t, s, db)
	boom := errors.New("the host's transaction fails")
	var trained bool
	err := db.Update(ctx, func(tx *index.Tx) error {
		_, err := s.PutBytes(ctx, tx, smallFile(39))
		require.NoError(t, err)
		require.NoError(t, tx.GetContext(ctx, &trained, `SELECT count(*) > 0 FROM dicts`))
		return boom
	})
	require.ErrorIs(t, err, boom)
	require.True(t, trained, "the write trained a dictionary in its transaction")
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	assert.Empty(t, ds, "the dictionary rolled back with the write")
	assert.Equal(t, before, storedBytes(t, s, db), "no re-encoding survived")

	// The Store's view of the newest dictionary is checked in each write's
	// transaction, so it stores without the one that rolled back.
	h, err := s.PutBytes(ctx, nil, smallFile(500))
	require.NoError(t, err)
	info, err := s.Stat(ctx, h)
	require.NoError(t, err)
	assert.True(t, info.Base.IsZero(), "stored without a dictionary")
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
	for i := range 39 {
		b, err := s.ReadAll(ctx, cas.Sum(smallFile(i)))
		require.NoError(t, err)
		require.Equal(t, smallFile(i), b)
	}
}

// TestDictVerifyFindsMissingAndDamagedDicts: a store whose dictionary blob
// is gone or altered reads none of the blobs compressed with it, and
// Verify names the dictionary and every such blob.
func TestDictVerifyFindsMissingAndDamagedDicts(t *testing.T) {
	for _, damage := range []string{"missing", "damaged"} {
		t.Run(damage, func(t *testing.T) {
			ctx := context.Background()
			s, db := newDictStore(t, cas.Options{DictTrainAfter: 32})
			for i := range 80 {
				_, err := s.PutBytes(ctx, nil, smallFile(i))
				require.NoError(t, err)
			}
			ds, err := s.Dicts(ctx)
			require.NoError(t, err)
			require.Len(t, ds, 1)
			d := ds[0].Hash
			var row struct {
				Size    int64  `db:"size"`
				Stored  int64  `db:"stored"`
				Codec   int    `db:"codec"`
				Data    []byte `db:"data"`
				Created int64  `db:"created"`
			}
			require.NoError(t, db.View(ctx, func(tx *index.Tx) error {
				return tx.GetContext(ctx, &row, `SELECT size, stored, codec, data, created FROM blobs WHERE hash = ?`, d)
			}))
			defer func() {
				// Mended, so the test's closing verify passes.
				require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
					_, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO blobs (hash, size, stored, codec, data, created) VALUES (?, ?, ?, ?, ?, ?)`,
						d, row.Size, row.Stored, row.Codec, row.Data, row.Created)
					return err
				}))
			}()
			require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
				q := `DELETE FROM blobs WHERE hash = ?`
				if damage == "damaged" {
					q = `UPDATE blobs SET data = zeroblob(length(data)), codec = 0, stored = length(data) WHERE hash = ?`
				}
				_, err := tx.ExecContext(ctx, q, d)
				return err
			}))
			// A new process: no dictionary loaded yet.
			s2, err := cas.New(db, cas.Options{DictTrainAfter: 32})
			require.NoError(t, err)
			last := cas.Sum(smallFile(79))
			_, err = s2.ReadAll(ctx, last)
			require.ErrorIs(t, err, cas.ErrCorrupt)
			rep, err := s2.Verify(ctx, nil)
			require.NoError(t, err)
			var dictProblems, blobProblems int
			for _, p := range rep.Problems {
				switch {
				case p.Kind == "dict" && p.Hash == d:
					dictProblems++
				case p.Kind == "blob" && strings.Contains(p.Err, "dictionary"):
					blobProblems++
				}
			}
			assert.Equal(t, 1, dictProblems, "%v", rep.Problems)
			assert.Greater(t, blobProblems, 40, "every blob compressed with it is named")

			// A write no longer uses a dictionary that does not load.
			h, err := s2.PutBytes(ctx, nil, smallFile(900))
			require.NoError(t, err)
			b, err := s2.ReadAll(ctx, h)
			require.NoError(t, err)
			assert.Equal(t, smallFile(900), b)
		})
	}
}

// TestDictDecoderIsBuiltOnce: reading many dictionary-compressed blobs
// loads the dictionary (reads its blob and builds its decoder) once.
func TestDictDecoderIsBuiltOnce(t *testing.T) {
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{DictTrainAfter: 32})
	for i := range 100 {
		_, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
	}
	s2, err := cas.New(db, cas.Options{DictTrainAfter: 32})
	require.NoError(t, err)
	for i := range 100 {
		_, err := s2.ReadAll(ctx, cas.Sum(smallFile(i)))
		require.NoError(t, err)
	}
	assert.Equal(t, int64(1), cas.DictLoads(s2))
}

// TestPruneDicts: an older dictionary no blob uses is unlisted, one in
// use and the newest stay.
func TestPruneDicts(t *testing.T) {
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{DictTrainAfter: -1})
	for i := range 60 {
		_, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
	}
	first, ok, err := s.TrainDict(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	// Many more blobs, written since the content drifted, make a better
	// dictionary, which re-encodes the samples it reads; blobs it did not
	// sample keep the first.
	for i := 60; i < 400; i++ {
		_, err := s.PutBytes(ctx, nil, smallFileOf(i, laterWords))
		require.NoError(t, err)
	}
	second, ok, err := s.TrainDict(ctx)
	require.NoError(t, err)
	require.True(t, ok, "a dictionary trained on more content does better")
	n, err := s.PruneDicts(ctx)
	require.NoError(t, err)
	assert.Equal(t, 0, n, "blobs still use the first dictionary")

	// Once no blob names the first, it is unlisted.
	require.NoError(t, db.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `DELETE FROM blobs WHERE codec = 1 AND base = ?`, first.Hash)
		return err
	}))
	n, err = s.PruneDicts(ctx)
	require.NoError(t, err)
	assert.Equal(t, 1, n)
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	require.Len(t, ds, 1)
	assert.Equal(t, second.Hash, ds[0].Hash, "the newest stays")
}

// A blob compressed with a dictionary reads on a store with one read
// connection whose dictionary cache is cold, whole and as the base of a
// delta: the dictionary is read once the read holds no connection.
func TestDictReadWithOneReadConn(t *testing.T) {
	ctx := context.Background()
	path := storetest.NewPath(t)
	db := storetest.OpenDBAt(t, path, index.Options{ReadConns: 1})
	s, err := cas.New(db, cas.Options{DictTrainAfter: 32})
	require.NoError(t, err)
	for i := range 40 {
		_, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
	}
	// A history over small files: the older version a delta against the
	// newer, which is stored with the dictionary.
	v1 := smallFile(100)
	v2 := append(bytes.Clone(v1), "one more line of the note\n"...)
	h1, err := s.PutVersion(ctx, nil, v1, cas.Hash{})
	require.NoError(t, err)
	h2, err := s.PutVersion(ctx, nil, v2, h1)
	require.NoError(t, err)
	_, err = s.Drain(ctx)
	require.NoError(t, err)
	info, err := s.Stat(ctx, h2)
	require.NoError(t, err)
	require.Equal(t, cas.CodecZstd, info.Codec)
	require.False(t, info.Base.IsZero(), "the newest version is compressed with the dictionary")
	old, err := s.Stat(ctx, h1)
	require.NoError(t, err)
	require.Equal(t, cas.CodecDelta, old.Codec)

	cold, err := cas.New(db, cas.Options{DictTrainAfter: 32})
	require.NoError(t, err)
	got, err := cold.ReadAll(ctx, h1)
	require.NoError(t, err)
	assert.Equal(t, v1, got)
	cold, err = cas.New(db, cas.Options{DictTrainAfter: 32})
	require.NoError(t, err)
	got, err = cold.ReadAll(ctx, h2)
	require.NoError(t, err)
	assert.Equal(t, v2, got)
}

// TestDictQueuedVersions: a write of a new version of a small file stores
// it raw and trains nothing, however many small blobs it crosses the
// training line by; the job runner trains, and a version's job compresses
// it with the newest dictionary while the version it replaced becomes a
// delta against it.
func TestDictQueuedVersions(t *testing.T) {
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{DictTrainAfter: 32, ReencodeIdle: time.Hour})
	heads := make([]cas.Hash, 21)
	for i := range heads {
		h, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
		heads[i] = h
	}
	ds, err := s.Dicts(ctx)
	require.NoError(t, err)
	require.Empty(t, ds, "21 new files are under the line")
	edit := func(i, n int) []byte {
		return append(smallFile(i), fmt.Sprintf("\nedit %d of note %d\n", n, i)...)
	}
	for n := range 2 {
		for i := range heads {
			h, err := s.PutVersion(ctx, nil, edit(i, n), heads[i])
			require.NoError(t, err)
			heads[i] = h
		}
	}
	ds, err = s.Dicts(ctx)
	require.NoError(t, err)
	require.Empty(t, ds, "63 small inserts, and no write trained")
	info, err := s.Stat(ctx, heads[0])
	require.NoError(t, err)
	assert.Equal(t, cas.CodecRaw, info.Codec, "a queued version is stored raw")

	_, err = s.Reencode(ctx, 0)
	require.NoError(t, err)
	ds, err = s.Dicts(ctx)
	require.NoError(t, err)
	require.Len(t, ds, 1, "the job runner trained")

	// With a dictionary listed: a new version is raw until its job.
	prev := heads[3]
	h, err := s.PutVersion(ctx, nil, edit(3, 2), prev)
	require.NoError(t, err)
	info, err = s.Stat(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, cas.CodecRaw, info.Codec)
	_, err = s.Reencode(ctx, 0)
	require.NoError(t, err)
	info, err = s.Stat(ctx, h)
	require.NoError(t, err)
	assert.Equal(t, cas.CodecZstd, info.Codec)
	assert.Equal(t, ds[0].Hash, info.Base, "its job compressed it with the dictionary")
	old, err := s.Stat(ctx, prev)
	require.NoError(t, err)
	assert.Equal(t, cas.CodecDelta, old.Codec, "the version it replaced is a delta against it")
	for _, c := range []struct {
		h cas.Hash
		b []byte
	}{{h, edit(3, 2)}, {prev, edit(3, 1)}} {
		b, err := s.ReadAll(ctx, c.h)
		require.NoError(t, err)
		assert.Equal(t, c.b, b)
	}
	raw := count(t, db, `SELECT count(*) FROM blobs WHERE codec = 0`)
	assert.Zero(t, raw, "no job leaves a version raw")
	rep, err := s.Verify(ctx, nil)
	require.NoError(t, err)
	assert.Empty(t, rep.Problems)
}

// TestDictUnlistedWhileJobPlanned: a job planned with a dictionary that is
// unlisted before its write transaction (pruned by another process) is
// planned again there, so no blob is stored naming a dictionary gc may
// collect.
func TestDictUnlistedWhileJobPlanned(t *testing.T) {
	ctx := context.Background()
	s, db := newDictStore(t, cas.Options{DictTrainAfter: -1, ReencodeIdle: time.Hour})
	for i := range 60 {
		_, err := s.PutBytes(ctx, nil, smallFile(i))
		require.NoError(t, err)
	}
	d, ok, err := s.TrainDict(ctx)
	require.NoError(t, err)
	require.True(t, ok)
	v1 := append(smallFile(500), "first\n"...)
	prev, err := s.PutBytes(ctx, nil, v1)
	require.NoError(t, err)
	v2 := append(smallFile(500), "second, with more to say\n"...)
	h, err := s.PutVersion(ctx, nil, v2, prev)
	require.NoError(t, err)

	cas.SetPlanned(s, func() {
		exec(t, db, `DELETE FROM dicts WHERE hash = ?`, d.Hash)
	})
	_, err = s.Reencode(ctx, 0)
	require.NoError(t, err)
	assert.Equal(t, int64(1), cas.StalePlans(s), "the plan is made again in the write transaction")
	info, err := s.Stat(ctx, h)
	require.NoError(t, err)
	assert.NotEqual(t, d.Hash, info.Base, "the version does not name the unlisted dictionary")
	assert.Equal(t, cas.CodecZstd, info.Codec)
	for _, c := range []struct {
		h cas.Hash
		b []byte
	}{{h, v2}, {prev, v1}} {
		b, err := s.ReadAll(ctx, c.h)
		require.NoError(t, err)
		assert.Equal(t, c.b, b)
	}
}
