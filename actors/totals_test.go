package actors_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// walked counts actor's live tree the long way.
func walked(t *testing.T, st *wsstore.Store, actor string) (files, dirs, bytes int64) {
	t.Helper()
	ctx := context.Background()
	root := vfs.EmptyTree
	spaces, err := st.Actors.Actors(ctx)
	require.NoError(t, err)
	for _, sp := range spaces {
		if sp.Actor == actor {
			root = sp.Root
		}
	}
	require.NoError(t, st.Trees.Walk(ctx, nil, root, func(_ vfs.Path, e vfs.Entry) error {
		if e.Kind == vfs.KindDir {
			dirs++
		} else {
			files++
			bytes += e.Size
		}
		return nil
	}))
	return files, dirs, bytes
}

func requireTotalsWalked(t *testing.T, sp *actors.Spaces, st *wsstore.Store, actor, what string) {
	t.Helper()
	got, err := sp.Stats(context.Background(), actor)
	require.NoError(t, err)
	files, dirs, bytes := walked(t, st, actor)
	require.Equal(t, [3]int64{files, dirs, bytes}, [3]int64{got.Files, got.Dirs, got.Bytes}, "%s: files, dirs, bytes", what)
}

// TestStatsTotalsFollowEveryChange: through 400 random uploads (files
// replacing files, files where directories were refused), deletes of
// files and of whole directories, deletes by prefix and gcs, the totals
// Stats answers from the space's row are the live tree's, counted by a
// walk after every change.
func TestStatsTotalsFollowEveryChange(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	r := rand.New(rand.NewPCG(7, 18))
	dirs := []string{"", "a/", "a/b/", "a/b/c/", "d/", "d/e/"}
	path := func() string { return dirs[r.IntN(len(dirs))] + []string{"x.md", "y.txt", "b", "e", "z"}[r.IntN(5)] }
	for i := range 400 {
		var what string
		var err error
		switch n := r.IntN(10); {
		case n < 6:
			p := path()
			what = "upload " + p
			_, err = st.Actors.Upload(ctx, "alice", p, strings.NewReader(strings.Repeat("w", r.IntN(300))))
		case n < 8:
			p := strings.TrimSuffix(dirs[1+r.IntN(len(dirs)-1)], "/")
			if r.IntN(2) == 0 {
				p = path()
			}
			what = "delete " + p
			_, err = st.Actors.Delete(ctx, "alice", p)
		case n < 9:
			p := dirs[r.IntN(len(dirs))] + "x"
			what = "delete prefix " + p
			_, err = st.Actors.DeleteByPrefix(ctx, "alice", p)
		default:
			what = "gc"
			_, err = st.Actors.GC(ctx, actors.GCOptions{Actor: "alice", KeepVersions: 1 + r.IntN(3)})
		}
		if err != nil {
			// A file where a directory must go, a directory where a file
			// must go, a path that is not there: refused, nothing changed.
			require.Contains(t, []wserr.Code{wserr.NotADirectory, wserr.PathIsDirectory, wserr.FileNotFound},
				wserr.CodeOf(err), "step %d %s: %v", i, what, err)
		}
		requireTotalsWalked(t, st.Actors, st, "alice", fmt.Sprintf("step %d %s", i, what))
	}
	got, err := st.Actors.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.Positive(t, got.Files+got.Dirs, "the session leaves something to count")
}

// walkCounter is the store's trees with their walks counted; embedding
// *vfs.Trees keeps TotalsDelta, so the spaces keep totals.
type walkCounter struct {
	*vfs.Trees
	walks int
}

func (w *walkCounter) Walk(ctx context.Context, tx *index.Tx, root cas.Hash, fn func(vfs.Path, vfs.Entry) error) error {
	w.walks++
	return w.Trees.Walk(ctx, tx, root, fn)
}

// plainTrees has the actors.Trees methods only: no TotalsDelta.
type plainTrees struct{ actors.Trees }

// TestStatsReadsNoTree: Stats of a space of 300 files in 30 directories
// walks no tree; uploads and deletes move the totals by what they change
// (a walk only of a deleted directory's contents, for the change's own
// count). A space whose row has no totals (written by a build before
// they were kept) is walked, and counted whole by its next change; Trees
// that cannot count leave the totals out and Stats walks.
func TestStatsReadsNoTree(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	w := &walkCounter{Trees: st.Trees}
	sp := actors.New(st.DB, st.Blobs, w, nil, time.Now)
	var bytes int64 // of the files left after dir07 is deleted
	for i := range 300 {
		content := fmt.Sprintf("file %d\n", i)
		_, err := sp.Upload(ctx, "alice", fmt.Sprintf("dir%02d/f%03d.md", i%30, i), strings.NewReader(content))
		require.NoError(t, err)
		if i%30 != 7 {
			bytes += int64(len(content))
		}
	}
	_, err := sp.Delete(ctx, "alice", "dir07")
	require.NoError(t, err)
	w.walks = 0
	got, err := sp.Stats(ctx, "alice")
	require.NoError(t, err)
	assert.Equal(t, 0, w.walks, "Stats reads the row, not the tree")
	assert.Equal(t, [3]int64{290, 29, bytes}, [3]int64{got.Files, got.Dirs, got.Bytes})
	requireTotalsWalked(t, sp, st, "alice", "after 300 uploads and a directory's delete")

	t.Run("NotCountedYet", func(t *testing.T) {
		require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(ctx, `UPDATE actor_spaces SET files = NULL, dirs = NULL, bytes = NULL WHERE actor = 'alice'`)
			return err
		}))
		w.walks = 0
		requireTotalsWalked(t, sp, st, "alice", "a row without totals")
		assert.Equal(t, 1, w.walks, "a row without totals is walked")
		_, err := sp.Upload(ctx, "alice", "dir00/new.md", strings.NewReader("new\n"))
		require.NoError(t, err)
		w.walks = 0
		requireTotalsWalked(t, sp, st, "alice", "counted whole by the next change")
		assert.Equal(t, 0, w.walks)
	})
	t.Run("TreesThatCannotCount", func(t *testing.T) {
		plain := actors.New(st.DB, st.Blobs, plainTrees{st.Trees}, nil, time.Now)
		_, err := plain.Upload(ctx, "bob", "a/b.md", strings.NewReader("bob\n"))
		require.NoError(t, err)
		requireTotalsWalked(t, plain, st, "bob", "no totals kept")
		_, err = sp.Upload(ctx, "bob", "a/c.md", strings.NewReader("more\n"))
		require.NoError(t, err)
		requireTotalsWalked(t, sp, st, "bob", "counted whole by a store that counts")
	})
}

// TestImportedSpacesAreCounted: a space an archive brings (ImportSpace)
// and one a sync moves forward (MergeSpace) get their totals with the
// row, so Stats walks no tree for them either.
func TestImportedSpacesAreCounted(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	upload(t, st, "alice", "a/one.md", "one\n")
	upload(t, st, "alice", "a/b/two.md", "two two\n")
	first := upload(t, st, "alice", "three.md", "three\n")
	later := upload(t, st, "alice", "a/b/c/four.md", "four four four\n")
	w := &walkCounter{Trees: st.Trees}
	sp := actors.New(st.DB, st.Blobs, w, nil, time.Now)
	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		added, err := sp.ImportSpace(ctx, tx, actors.SpaceRecord{Actor: "carol", Root: first.Root, Seq: 3, Created: 1, Updated: 1})
		require.True(t, added)
		return err
	}))
	w.walks = 0
	got, err := sp.Stats(ctx, "carol")
	require.NoError(t, err)
	assert.Equal(t, 0, w.walks)
	assert.Equal(t, [3]int64{3, 2, 4 + 8 + 6}, [3]int64{got.Files, got.Dirs, got.Bytes})

	require.NoError(t, st.DB.Update(ctx, func(tx *index.Tx) error {
		return sp.MergeSpace(ctx, tx, 3, actors.SpaceRecord{Actor: "carol", Root: later.Root, Seq: 4, Created: 1, Updated: 2})
	}))
	w.walks = 0
	got, err = sp.Stats(ctx, "carol")
	require.NoError(t, err)
	assert.Equal(t, 0, w.walks)
	assert.Equal(t, [3]int64{4, 3, 4 + 8 + 6 + 15}, [3]int64{got.Files, got.Dirs, got.Bytes})
}

// deltaCounter is the store's trees with the trees TotalsDelta is asked
// to compare recorded.
type deltaCounter struct {
	*vfs.Trees
	from []cas.Hash
}

func (d *deltaCounter) TotalsDelta(ctx context.Context, tx *index.Tx, a, b cas.Hash) (vfs.Totals, error) {
	d.from = append(d.from, a)
	return d.Trees.TotalsDelta(ctx, tx, a, b)
}

// TestGCKeepsTheTotalsUncounted: a gc that prunes a space's old versions
// leaves its root, and so its totals, where they are: it counts no tree
// (the space's tree whole least of all), and Stats still answers the row.
func TestGCKeepsTheTotalsUncounted(t *testing.T) {
	ctx := context.Background()
	st := openStore(t)
	d := &deltaCounter{Trees: st.Trees}
	sp := actors.New(st.DB, st.Blobs, d, nil, time.Now)
	for i := range 40 {
		_, err := sp.Upload(ctx, "alice", fmt.Sprintf("dir%d/f%d.md", i%4, i), strings.NewReader(fmt.Sprintf("file %d\n", i)))
		require.NoError(t, err)
	}
	d.from = nil
	rep, err := sp.GC(ctx, actors.GCOptions{Actor: "alice", KeepVersions: 2})
	require.NoError(t, err)
	require.Positive(t, rep.Pruned)
	for _, a := range d.from {
		assert.NotEqual(t, vfs.EmptyTree, a, "gc counted the space's tree whole")
	}
	requireTotalsWalked(t, sp, st, "alice", "after gc")
}
