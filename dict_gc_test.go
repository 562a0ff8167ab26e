package wsstore_test

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/archive"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/internal/storetest"
)

var noteWords = strings.Fields(`river castle lantern forest merchant sword harbor winter signal archive garden
tower shadow letter market bridge engine window marble silver thunder compass orchard library painter captain
village mirror ribbon anchor cellar meadow quiet bright hollow ancient restless gentle crooked golden narrow
buffer config handler request response context index record stream parser token schema cursor worker channel
the of and to in is that for it as was with be by on not this are or from at which but have an`)

// note returns small file i: a few hundred bytes to 4 KiB of prose.
func note(i int) []byte { return noteOf(i, noteWords) }

// laterNoteWords is the vocabulary of notes written after the content
// drifted.
var laterNoteWords = strings.Fields(`ledger voyage quarry beacon tundra falcon glacier spindle pewter saffron
lattice furnace parlor tavern caravan migrate stitch harvest kindle scatter weave polish mend render commit
rebase shard lease ticket replica a so up out if about who get go me when make can like time no just him`)

// noteOf is note i written with the words of vocab.
func noteOf(i int, vocab []string) []byte {
	r := rand.New(rand.NewPCG(11, uint64(i)))
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Note %d\n\n", i)
	for size := 200 + r.IntN(4<<10); b.Len() < size; {
		for range 6 + r.IntN(12) {
			b.WriteString(vocab[r.IntN(len(vocab))] + " ")
		}
		b.WriteString(".\n")
	}
	return b.Bytes()
}

func newDictEnv(t *testing.T) *env {
	t.Helper()
	c := &clock{t: t0}
	s := storetest.OpenStoreWith(t, wsstore.Options{Now: c.Now, CAS: cas.Options{DictTrainAfter: -1}})
	return &env{t: t, ctx: context.Background(), clock: c, s: s}
}

// TestGCKeepsDictionariesInUse: a listed dictionary is a root; one no
// longer listed stays while a kept blob is compressed with it, and goes
// once none is.
func TestGCKeepsDictionariesInUse(t *testing.T) {
	e := newDictEnv(t)
	e.create("chat-1", "run_a")
	e.create("chat-1", "run_b")
	for i := range 60 {
		e.write("run_a", fmt.Sprintf("output/notes/%03d.md", i), note(i))
	}
	d1, ok, err := e.s.Blobs.TrainDict(e.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	// run_b writes after the content drifted: a new dictionary pays.
	for i := 60; i < 300; i++ {
		e.write("run_b", fmt.Sprintf("output/notes/%03d.md", i), noteOf(i, laterNoteWords))
	}
	d2, ok, err := e.s.Blobs.TrainDict(e.ctx)
	require.NoError(t, err)
	require.True(t, ok)

	e.collect()
	assert.True(t, e.has(d1.Hash))
	assert.True(t, e.has(d2.Hash))

	// Unlisted while run_a's and run_b's blobs use it: gc keeps it for them.
	e.exec(`DELETE FROM dicts WHERE id = ?`, d1.ID)
	e.collect()
	require.True(t, e.has(d1.Hash), "blobs gc keeps are compressed with it")
	e.requireReadable("run_a", map[string][]byte{"output/notes/007.md": note(7)})
	e.requireReadable("run_b", map[string][]byte{"output/notes/100.md": noteOf(100, laterNoteWords)})
	rep, err := e.s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	require.True(t, rep.OK(), "%v", rep.Problems)

	// Nothing uses either once both runs are gone: the unlisted one goes,
	// the listed one stays for the next writes.
	e.drop("run_a")
	e.drop("run_b")
	e.collect()
	assert.False(t, e.has(d1.Hash), "no kept blob uses it and it is not listed")
	assert.True(t, e.has(d2.Hash), "a listed dictionary is a root")
}

// TestFsckNamesAMissingDictionary: the blob of a listed dictionary is gone;
// fsck names the dictionary and the files that need it.
func TestFsckNamesAMissingDictionary(t *testing.T) {
	e := newCorruptibleEnv(t, wsstore.Options{CAS: cas.Options{DictTrainAfter: -1}})
	e.create("chat-1", "run_a")
	for i := range 60 {
		e.write("run_a", fmt.Sprintf("output/notes/%03d.md", i), note(i))
	}
	d, ok, err := e.s.Blobs.TrainDict(e.ctx)
	require.NoError(t, err)
	require.True(t, ok)
	e.exec(`DELETE FROM blobs WHERE hash = ?`, d.Hash)
	rep, err := e.s.Fsck(e.ctx, nil)
	require.NoError(t, err)
	require.False(t, rep.OK())
	var text []string
	for _, p := range rep.Problems {
		text = append(text, p.String())
	}
	all := strings.Join(text, "\n")
	assert.Contains(t, all, "dictionary 1")
	assert.Contains(t, all, d.Hash.String())
	_, err = e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1})
	assert.Error(t, err, "gc deletes nothing while a root is missing")
}

// TestArchiveRoundTripWithDictionaries: an archive carries plain bytes, so
// a run whose files are compressed with a dictionary imports into a store
// that has none (and trains its own).
func TestArchiveRoundTripWithDictionaries(t *testing.T) {
	e := newEnv(t)
	e.create("chat-1", "run_a")
	want := map[string][]byte{}
	for i := range 120 {
		p := fmt.Sprintf("output/notes/%03d.md", i)
		want[p] = note(i)
		e.write("run_a", p, note(i))
	}
	// The store's background runner trains once the writes pause; the
	// files written after it are compressed with its dictionary.
	var ds []cas.DictInfo
	var err error
	require.Eventually(t, func() bool {
		ds, err = e.s.Blobs.Dicts(e.ctx)
		return err != nil || len(ds) > 0
	}, 30*time.Second, 10*time.Millisecond, "the default options train one on their own")
	require.NoError(t, err)
	last := ""
	for i := 120; i < 130; i++ {
		last = fmt.Sprintf("output/notes/%03d.md", i)
		want[last] = note(i)
		e.write("run_a", last, note(i))
	}
	e.settle()
	info, err := e.s.Blobs.Stat(e.ctx, e.stat("run_a", last).Hash)
	require.NoError(t, err)
	require.Equal(t, ds[len(ds)-1].Hash, info.Base, "a file written after the training uses the dictionary")

	var buf bytes.Buffer
	_, err = e.s.Archive.Export(e.ctx, &buf, archive.Scope{Runs: []string{"run_a"}}, archive.Options{})
	require.NoError(t, err)
	dst := &env{t: t, ctx: e.ctx, clock: e.clock, s: storetest.OpenStoreWith(t, wsstore.Options{Now: e.clock.Now})}
	_, err = dst.s.Archive.Import(e.ctx, &buf, archive.Options{})
	require.NoError(t, err)
	dst.requireReadable("run_a", want)
}
