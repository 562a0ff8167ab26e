package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func TestTreesPutEntries(t *testing.T) {
	h := cas.Sum([]byte("x"))
	entries := []vfs.Entry{
		{Name: "b", Kind: vfs.KindFile, Hash: h, Size: 2},
		{Name: "a", Kind: vfs.KindFile, Hash: h, Size: 1},
	}
	sorted := []vfs.Entry{entries[1], entries[0]}

	t.Run("OKRoundTrip", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		var root cas.Hash
		env.update(t, func(tx *index.Tx) error {
			var err error
			root, err = env.trees.Put(env.ctx, tx, entries)
			require.NoError(t, err)
			// A write transaction reads its own trees.
			got, err := env.trees.Entries(env.ctx, tx, root)
			require.NoError(t, err)
			assert.Equal(t, sorted, got)
			return nil
		})
		data, err := vfs.EncodeTree(entries)
		require.NoError(t, err)
		assert.Equal(t, vfs.TreeHash(data), root)

		// A fresh Trees has nothing cached, so this reads the row.
		fresh := vfs.NewTrees(env.db, env.blobs, nil)
		got, err := fresh.Entries(env.ctx, nil, root)
		require.NoError(t, err)
		assert.Equal(t, sorted, got)
	})
	t.Run("OKEntriesIsACopy", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		var root cas.Hash
		env.update(t, func(tx *index.Tx) error {
			var err error
			root, err = env.trees.Put(env.ctx, tx, entries)
			return err
		})
		got, err := env.trees.Entries(env.ctx, nil, root)
		require.NoError(t, err)
		got[0].Name = "changed"
		again, err := env.trees.Entries(env.ctx, nil, root)
		require.NoError(t, err)
		assert.Equal(t, sorted, again)
	})
	t.Run("OKEmptyTreeWithoutRow", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		got, err := env.trees.Entries(env.ctx, nil, vfs.EmptyTree)
		require.NoError(t, err)
		assert.Nil(t, got)
		assert.Zero(t, env.treeRows(t))
	})
	t.Run("OKRewrittenAfterRollback", func(t *testing.T) {
		// The first Put's transaction rolls back; the second must still
		// write the row, although the tree was seen (and cached) before.
		env := newTreeEnv(t, cas.Options{})
		errRollback := errors.New("roll back")
		err := env.db.Update(env.ctx, func(tx *index.Tx) error {
			_, err := env.trees.Put(env.ctx, tx, entries)
			require.NoError(t, err)
			return errRollback
		})
		require.ErrorIs(t, err, errRollback)
		assert.Zero(t, env.treeRows(t))
		var root cas.Hash
		env.update(t, func(tx *index.Tx) error {
			root, err = env.trees.Put(env.ctx, tx, entries)
			return err
		})
		assert.Equal(t, 1, env.treeRows(t))
		_, err = vfs.NewTrees(env.db, env.blobs, nil).Entries(env.ctx, nil, root)
		require.NoError(t, err)
	})
	t.Run("OKCreatedOnlyMovesForward", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		created := func(root cas.Hash) int64 {
			var n int64
			require.NoError(t, env.db.View(env.ctx, func(tx *index.Tx) error {
				return tx.GetContext(env.ctx, &n, `SELECT created FROM trees WHERE hash = ?`, root[:])
			}))
			return n
		}
		put := func(at time.Time) cas.Hash {
			env.clock = at
			var root cas.Hash
			env.update(t, func(tx *index.Tx) error {
				var err error
				root, err = env.trees.Put(env.ctx, tx, entries)
				return err
			})
			return root
		}
		root := put(time.Unix(100, 0))
		assert.Equal(t, time.Unix(100, 0).UnixNano(), created(root))
		put(time.Unix(50, 0))
		assert.Equal(t, time.Unix(100, 0).UnixNano(), created(root), "an earlier clock must not move created back")
		put(time.Unix(200, 0))
		assert.Equal(t, time.Unix(200, 0).UnixNano(), created(root), "a re-put refreshes created for gc")
	})
	t.Run("ErrNoTransaction", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		_, err := env.trees.Put(env.ctx, nil, entries)
		requireCode(t, err, wserr.Internal)
	})
	t.Run("ErrInvalidEntries", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		env.update(t, func(tx *index.Tx) error {
			_, err := env.trees.Put(env.ctx, tx, append(entries, entries[0]))
			requireCode(t, err, wserr.InvalidArgument)
			return nil
		})
		assert.Zero(t, env.treeRows(t))
	})
	t.Run("ErrCorruptMissingTree", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		_, err := env.trees.Entries(env.ctx, nil, cas.Sum([]byte("nothing")))
		we := requireCode(t, err, wserr.Corrupt)
		assert.Contains(t, we.Msg, "tree missing")
	})
	t.Run("ErrCorruptRow", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		good, err := vfs.EncodeTree(entries)
		require.NoError(t, err)
		undecodable := []byte{1, 9}
		undecodableHash := vfs.TreeHash(undecodable)
		wrongHash := vfs.TreeHash([]byte("other"))
		env.update(t, func(tx *index.Tx) error {
			_, err := tx.ExecContext(env.ctx, `INSERT INTO trees (hash, data, created) VALUES (?, ?, 0), (?, ?, 0)`,
				undecodableHash[:], undecodable, wrongHash[:], good)
			return err
		})
		_, err = env.trees.Entries(env.ctx, nil, vfs.TreeHash(undecodable))
		requireCode(t, err, wserr.Corrupt)
		_, err = env.trees.Entries(env.ctx, nil, wrongHash)
		we := requireCode(t, err, wserr.Corrupt)
		assert.Contains(t, we.Msg, "does not hash to its address")
	})
}

func TestTreesCacheIsBounded(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	vfs.SetTreeCacheSize(env.trees, 8)
	var roots []cas.Hash
	env.update(t, func(tx *index.Tx) error {
		for i := range 50 {
			h, err := env.trees.Put(env.ctx, tx, []vfs.Entry{{Name: fmt.Sprint(i), Kind: vfs.KindFile, Size: int64(i)}})
			require.NoError(t, err)
			roots = append(roots, h)
		}
		return nil
	})
	assert.LessOrEqual(t, vfs.TreeCacheLen(env.trees), 8)
	for i, h := range roots {
		es, err := env.trees.Entries(env.ctx, nil, h)
		require.NoError(t, err)
		assert.Equal(t, int64(i), es[0].Size)
	}
	assert.LessOrEqual(t, vfs.TreeCacheLen(env.trees), 8)
}

// TestTreesCacheBoundsEntries: the bound NewTreesCache sets counts
// entries, so wide trees take more of it; the cache never holds much more
// than its bound.
func TestTreesCacheBoundsEntries(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	env.trees = vfs.NewTreesCache(env.db, env.blobs, nil, 1000)
	env.update(t, func(tx *index.Tx) error {
		for i := range 50 {
			es := make([]vfs.Entry, 99)
			for j := range es {
				es[j] = vfs.Entry{Name: fmt.Sprintf("f%03d", j), Kind: vfs.KindFile, Size: int64(i*100 + j)}
			}
			_, err := env.trees.Put(env.ctx, tx, es)
			require.NoError(t, err)
		}
		return nil
	})
	n := vfs.TreeCacheLen(env.trees)
	assert.Positive(t, n)
	assert.LessOrEqual(t, n, 10, "two generations of 500 entries: five 100-entry trees each")
}

func TestTreesLookup(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.build(t, map[string]string{
		"a.txt":               "alpha",
		"docs/readme.md":      "read me",
		"docs/guide/intro.md": "hello",
	})
	cases := []struct {
		name, path string
		kind       vfs.Kind
		size       int64
		err        wserr.Code
	}{
		{"OKFile", "a.txt", vfs.KindFile, 5, ""},
		{"OKNestedFile", "docs/guide/intro.md", vfs.KindFile, 5, ""},
		{"OKDirWithTotalSize", "docs", vfs.KindDir, 12, ""},
		{"ErrFileNotFound", "b.txt", 0, 0, wserr.FileNotFound},
		{"ErrFileNotFoundInMissingDir", "nope/a.txt", 0, 0, wserr.FileNotFound},
		{"ErrFileNotFoundThroughFile", "a.txt/b", 0, 0, wserr.FileNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := vfs.MustPath(tc.path)
			e, err := env.trees.Lookup(env.ctx, nil, root, p)
			if tc.err != "" {
				we := requireCode(t, err, tc.err)
				assert.Equal(t, tc.path, we.Path)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, p.Base(), e.Name)
			assert.Equal(t, tc.kind, e.Kind)
			assert.Equal(t, tc.size, e.Size)
		})
	}
	t.Run("OKRoot", func(t *testing.T) {
		e, err := env.trees.Lookup(env.ctx, nil, root, vfs.Root())
		require.NoError(t, err)
		assert.Equal(t, vfs.Entry{Kind: vfs.KindDir, Hash: root, Size: 17}, e)
	})
	t.Run("OKEmptyRoot", func(t *testing.T) {
		e, err := env.trees.Lookup(env.ctx, nil, vfs.EmptyTree, vfs.Root())
		require.NoError(t, err)
		assert.Equal(t, vfs.Entry{Kind: vfs.KindDir, Hash: vfs.EmptyTree}, e)
	})
	t.Run("ErrCorruptMissingRoot", func(t *testing.T) {
		_, err := env.trees.Lookup(env.ctx, nil, cas.Sum(nil), vfs.MustPath("a.txt"))
		requireCode(t, err, wserr.Corrupt)
	})
}

func TestTreesSet(t *testing.T) {
	base := map[string]string{
		"a.txt":               "alpha",
		"docs/readme.md":      "read me",
		"docs/guide/intro.md": "hello",
		"src/main.go":         "package main",
	}
	with := func(changes map[string]*string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range changes {
			if v == nil {
				delete(out, k)
			} else {
				out[k] = *v
			}
		}
		return out
	}
	cases := []struct {
		name    string
		path    string
		content *string // nil deletes
		want    map[string]string
		err     wserr.Code
	}{
		{"OKCreateFile", "b.txt", ptr("beta"), with(map[string]*string{"b.txt": ptr("beta")}), ""},
		{"OKCreateIntermediateDirs", "x/y/z.txt", ptr("zed"), with(map[string]*string{"x/y/z.txt": ptr("zed")}), ""},
		{"OKReplaceFile", "docs/guide/intro.md", ptr("bye"), with(map[string]*string{"docs/guide/intro.md": ptr("bye")}), ""},
		{"OKDeleteFile", "a.txt", nil, with(map[string]*string{"a.txt": nil}), ""},
		{"OKDeleteRemovesEmptyDirs", "docs/guide/intro.md", nil, with(map[string]*string{"docs/guide/intro.md": nil}), ""},
		{"OKDeleteDirectory", "docs", nil, with(map[string]*string{"docs/readme.md": nil, "docs/guide/intro.md": nil}), ""},
		{"ErrNotADirectory", "a.txt/b.txt", ptr("x"), nil, wserr.NotADirectory},
		{"ErrNotADirectoryDeep", "a.txt/b/c.txt", ptr("x"), nil, wserr.NotADirectory},
		{"ErrPathIsDirectory", "docs", ptr("x"), nil, wserr.PathIsDirectory},
		{"ErrFileNotFoundDelete", "b.txt", nil, nil, wserr.FileNotFound},
		{"ErrFileNotFoundDeleteInMissingDir", "nope/b.txt", nil, nil, wserr.FileNotFound},
		{"ErrFileNotFoundDeleteThroughFile", "a.txt/b", nil, nil, wserr.FileNotFound},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			env := newTreeEnv(t, cas.Options{})
			root := env.build(t, base)
			rows := env.treeRows(t)
			got, err := env.set(t, root, tc.path, tc.content)
			if tc.err != "" {
				we := requireCode(t, err, tc.err)
				assert.Equal(t, tc.path, we.Path)
				assert.Equal(t, rows, env.treeRows(t), "a failed Set writes no tree")
			} else {
				require.NoError(t, err)
				assert.Equal(t, tc.want, env.files(t, got))
				assertSizes(t, env, got)
			}
			assert.Equal(t, base, env.files(t, root), "Set never changes the old root")
		})
	}

	t.Run("OKUnchangedWritesNothing", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		root := env.build(t, base)
		rows := env.treeRows(t)
		got, err := env.set(t, root, "docs/guide/intro.md", ptr("hello"))
		require.NoError(t, err)
		assert.Equal(t, root, got)
		assert.Equal(t, rows, env.treeRows(t))
	})
	t.Run("OKNameIgnored", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		var root cas.Hash
		env.update(t, func(tx *index.Tx) error {
			e := env.file(t, tx, "x")
			e.Name = "other"
			var err error
			root, err = env.trees.Set(env.ctx, tx, vfs.EmptyTree, vfs.MustPath("d/right"), &e)
			return err
		})
		assert.Equal(t, map[string]string{"d/right": "x"}, env.files(t, root))
	})
	t.Run("OKDeleteLastFileLeavesEmptyTree", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		root := env.build(t, map[string]string{"a/b/c.txt": "c"})
		got, err := env.set(t, root, "a/b/c.txt", nil)
		require.NoError(t, err)
		assert.Equal(t, vfs.EmptyTree, got)
	})
	t.Run("OKSameContentSameRoot", func(t *testing.T) {
		// Trees are canonical: the same files give the same root whatever
		// the order and history of the writes.
		env := newTreeEnv(t, cas.Options{})
		one := env.build(t, base)
		two, err := env.set(t, vfs.EmptyTree, "src/main.go", ptr("package main"))
		require.NoError(t, err)
		for _, p := range []string{"docs/guide/intro.md", "tmp/x", "a.txt", "docs/readme.md"} {
			two, err = env.set(t, two, p, ptr(base[p]))
			require.NoError(t, err)
		}
		two, err = env.set(t, two, "tmp/x", nil)
		require.NoError(t, err)
		assert.Equal(t, one, two)
	})
	t.Run("ErrInvalidPathRoot", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		err := env.db.Update(env.ctx, func(tx *index.Tx) error {
			_, err := env.trees.Set(env.ctx, tx, vfs.EmptyTree, vfs.Root(), nil)
			return err
		})
		requireCode(t, err, wserr.InvalidPath)
	})
	t.Run("ErrInvalidArgument", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		for _, e := range []vfs.Entry{
			{Kind: 0, Hash: cas.Sum(nil)},
			{Kind: vfs.KindFile, Hash: cas.Sum(nil), Size: -1},
		} {
			err := env.db.Update(env.ctx, func(tx *index.Tx) error {
				_, err := env.trees.Set(env.ctx, tx, vfs.EmptyTree, vfs.MustPath("a"), &e)
				return err
			})
			requireCode(t, err, wserr.InvalidArgument)
		}
	})
	t.Run("ErrNoTransaction", func(t *testing.T) {
		env := newTreeEnv(t, cas.Options{})
		_, err := env.trees.Set(env.ctx, nil, vfs.EmptyTree, vfs.MustPath("a"), nil)
		requireCode(t, err, wserr.Internal)
	})
}

// assertSizes checks that every directory's size is the total of the files
// below it.
func assertSizes(t *testing.T, env *treeEnv, root cas.Hash) {
	t.Helper()
	var check func(h cas.Hash) int64
	check = func(h cas.Hash) int64 {
		es, err := env.trees.Entries(env.ctx, nil, h)
		require.NoError(t, err)
		var total int64
		for _, e := range es {
			if e.Kind == vfs.KindDir {
				assert.Equal(t, check(e.Hash), e.Size, "size of %s", e.Name)
			}
			total += e.Size
		}
		return total
	}
	check(root)
}

func TestTreesSetGraft(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	src := env.build(t, map[string]string{"lib/a.go": "aa", "lib/sub/b.go": "bbb"})
	dst := env.build(t, map[string]string{"main.go": "m", "vendor/x": "x"})
	lib, err := env.trees.Lookup(env.ctx, nil, src, vfs.MustPath("lib"))
	require.NoError(t, err)
	graft := func(root cas.Hash, p string, e vfs.Entry) (cas.Hash, error) {
		var out cas.Hash
		err := env.db.Update(env.ctx, func(tx *index.Tx) error {
			var err error
			out, err = env.trees.Set(env.ctx, tx, root, vfs.MustPath(p), &e)
			return err
		})
		return out, err
	}

	t.Run("OKSharesTheSubtree", func(t *testing.T) {
		rows := env.treeRows(t)
		wrong := lib
		wrong.Size = 1 // a dir's size comes from its tree
		got, err := graft(dst, "vendor/lib", wrong)
		require.NoError(t, err)
		assert.Equal(t, 2, env.treeRows(t)-rows, "only vendor and the root are new")
		e, err := env.trees.Lookup(env.ctx, nil, got, vfs.MustPath("vendor/lib"))
		require.NoError(t, err)
		assert.Equal(t, lib.Hash, e.Hash)
		assert.Equal(t, int64(5), e.Size)
		assert.Equal(t, map[string]string{
			"main.go": "m", "vendor/x": "x", "vendor/lib/a.go": "aa", "vendor/lib/sub/b.go": "bbb",
		}, env.files(t, got))
		assertSizes(t, env, got)
	})
	t.Run("OKReplacesADirectory", func(t *testing.T) {
		got, err := graft(dst, "vendor", lib)
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"main.go": "m", "vendor/a.go": "aa", "vendor/sub/b.go": "bbb"}, env.files(t, got))
	})
	t.Run("OKEmptyTreeRemoves", func(t *testing.T) {
		got, err := graft(dst, "vendor", vfs.Entry{Kind: vfs.KindDir, Hash: vfs.EmptyTree})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"main.go": "m"}, env.files(t, got))
	})
	t.Run("OKEmptyTreeWhereNothingIs", func(t *testing.T) {
		got, err := graft(dst, "new/dir", vfs.Entry{Kind: vfs.KindDir, Hash: vfs.EmptyTree})
		require.NoError(t, err)
		assert.Equal(t, dst, got)
	})
	t.Run("ErrNotADirectoryOverFile", func(t *testing.T) {
		_, err := graft(dst, "main.go", lib)
		requireCode(t, err, wserr.NotADirectory)
		_, err = graft(dst, "main.go", vfs.Entry{Kind: vfs.KindDir, Hash: vfs.EmptyTree})
		requireCode(t, err, wserr.NotADirectory)
	})
	t.Run("ErrCorruptMissingTree", func(t *testing.T) {
		_, err := graft(dst, "x", vfs.Entry{Kind: vfs.KindDir, Hash: cas.Sum([]byte("no such tree"))})
		requireCode(t, err, wserr.Corrupt)
	})
	// row reads the grafted tree's stored row.
	type treeRow struct {
		Data    []byte `db:"data"`
		Created int64  `db:"created"`
	}
	row := func(h cas.Hash) (r treeRow, err error) {
		err = env.db.View(env.ctx, func(tx *index.Tx) error {
			return tx.GetContext(env.ctx, &r, `SELECT data, created FROM trees WHERE hash = ?`, h[:])
		})
		return r, err
	}
	t.Run("OKLeavesTheGraftedRowAsItIs", func(t *testing.T) {
		// Grafting costs the path to the graft, not the grafted tree's
		// width: its row is neither encoded nor written again.
		before, err := row(lib.Hash)
		require.NoError(t, err)
		env.clock = env.clock.Add(time.Hour)
		_, err = graft(dst, "vendor/again", lib)
		require.NoError(t, err)
		after, err := row(lib.Hash)
		require.NoError(t, err)
		assert.Equal(t, before, after)
	})
	t.Run("ErrCorruptRowOnlyInTheCache", func(t *testing.T) {
		// gc collected the tree (and maybe what it names); this Trees
		// still has it cached. Grafting it would make a root name rows
		// that are gone.
		_, err := env.trees.Lookup(env.ctx, nil, lib.Hash, vfs.Root())
		require.NoError(t, err)
		require.NoError(t, env.db.Update(env.ctx, func(tx *index.Tx) error {
			_, err := tx.ExecContext(env.ctx, `DELETE FROM trees WHERE hash = ?`, lib.Hash[:])
			return err
		}))
		rows := env.treeRows(t)
		_, err = graft(dst, "vendor/lib", lib)
		requireCode(t, err, wserr.Corrupt)
		assert.Equal(t, rows, env.treeRows(t), "nothing is written")
	})
}

// TestTreesSetCopyOnWriteRows proves that a write in a 10,000-file
// workspace stores only the trees on the written path.
func TestTreesSetCopyOnWriteRows(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.buildLarge(t)
	require.Equal(t, 1+largeTop+largeTop*largeMid+largeTop*largeMid*largeLeaf, env.treeRows(t))
	top, err := env.trees.Lookup(env.ctx, nil, root, vfs.Root())
	require.NoError(t, err)
	require.Equal(t, int64(10*largeTop*largeMid*largeLeaf*largeFiles), top.Size)

	const depth = 3 // segments above the file: d2/e3/f4
	cases := []struct{ name, path string }{
		{"OKNewFile", "d2/e3/f4/new.md"},
		{"OKReplaceFile", "d2/e3/f4/file050"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := env.treeRows(t)
			got, err := env.set(t, root, tc.path, ptr("new content"))
			require.NoError(t, err)
			assert.LessOrEqual(t, env.treeRows(t)-before, depth+1)
			e, err := env.trees.Lookup(env.ctx, nil, got, vfs.MustPath(tc.path))
			require.NoError(t, err)
			assert.Equal(t, cas.Sum([]byte("new content")), e.Hash)
			// A neighbouring directory is shared, not copied.
			oldN, err := env.trees.Lookup(env.ctx, nil, root, vfs.MustPath("d2/e3/f3"))
			require.NoError(t, err)
			newN, err := env.trees.Lookup(env.ctx, nil, got, vfs.MustPath("d2/e3/f3"))
			require.NoError(t, err)
			assert.Equal(t, oldN, newN)
		})
	}
}

func BenchmarkTreeSet(b *testing.B) {
	env := newTreeEnv(b, cas.Options{})
	root := env.buildLarge(b)
	p := vfs.MustPath("d2/e3/f4/file050")
	i := 0
	for b.Loop() {
		i++
		e := vfs.Entry{Kind: vfs.KindFile, Hash: cas.Sum(fmt.Appendf(nil, "%d", i)), Size: int64(i)}
		err := env.db.Update(env.ctx, func(tx *index.Tx) error {
			var err error
			root, err = env.trees.Set(env.ctx, tx, root, p, &e)
			return err
		})
		if err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkTreeLookupCold reads a file entry three directories deep with
// an empty cache: four tree rows (or patch chains) read and decoded.
func BenchmarkTreeLookupCold(b *testing.B) {
	env := newTreeEnv(b, cas.Options{})
	root := env.buildLarge(b)
	p := vfs.MustPath("d2/e3/f4/file050")
	for i := range 50 { // give the path's directories patch chains
		e := vfs.Entry{Kind: vfs.KindFile, Hash: cas.Sum(fmt.Appendf(nil, "%d", i)), Size: int64(i)}
		env.update(b, func(tx *index.Tx) error {
			var err error
			root, err = env.trees.Set(env.ctx, tx, root, p, &e)
			return err
		})
	}
	for b.Loop() {
		cold := vfs.NewTrees(env.db, env.blobs, nil)
		if _, err := cold.Lookup(env.ctx, nil, root, p); err != nil {
			b.Fatal(err)
		}
	}
}

func TestTreesList(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.build(t, map[string]string{
		"a/b/c.txt": "c",
		"a/d.txt":   "dd",
		"a-x":       "x",
		"z.txt":     "zzz",
	})
	paths := func(ls []vfs.Listed) []string {
		var out []string
		for _, l := range ls {
			out = append(out, l.Path.String())
		}
		return out
	}
	cases := []struct {
		name  string
		path  vfs.Path
		depth int
		want  []string
	}{
		{"OKRootDepth1", vfs.Root(), 1, []string{"a", "a-x", "z.txt"}},
		{"OKDepthZeroMeansOne", vfs.Root(), 0, []string{"a", "a-x", "z.txt"}},
		{"OKNegativeDepthMeansOne", vfs.Root(), -3, []string{"a", "a-x", "z.txt"}},
		// Pre-order puts a's contents before "a-x", although "a-x" < "a/b"
		// as strings: paths compare segment by segment.
		{"OKRootDepth2", vfs.Root(), 2, []string{"a", "a/b", "a/d.txt", "a-x", "z.txt"}},
		{"OKRootAll", vfs.Root(), 100, []string{"a", "a/b", "a/b/c.txt", "a/d.txt", "a-x", "z.txt"}},
		{"OKSubdir", vfs.MustPath("a"), 1, []string{"a/b", "a/d.txt"}},
		{"OKSubdirDeep", vfs.MustPath("a"), 2, []string{"a/b", "a/b/c.txt", "a/d.txt"}},
		{"OKFile", vfs.MustPath("a/d.txt"), 1, []string{"a/d.txt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ls, err := env.trees.List(env.ctx, nil, root, tc.path, tc.depth)
			require.NoError(t, err)
			assert.Equal(t, tc.want, paths(ls))
		})
	}
	t.Run("OKEntries", func(t *testing.T) {
		ls, err := env.trees.List(env.ctx, nil, root, vfs.MustPath("a"), 1)
		require.NoError(t, err)
		require.Len(t, ls, 2)
		assert.Equal(t, vfs.KindDir, ls[0].Kind)
		assert.Equal(t, "b", ls[0].Name)
		assert.Equal(t, int64(1), ls[0].Size)
		assert.Equal(t, vfs.KindFile, ls[1].Kind)
		assert.Equal(t, cas.Sum([]byte("dd")), ls[1].Hash)
	})
	t.Run("OKEmptyTree", func(t *testing.T) {
		ls, err := env.trees.List(env.ctx, nil, vfs.EmptyTree, vfs.Root(), 1)
		require.NoError(t, err)
		assert.Empty(t, ls)
	})
	t.Run("ErrFileNotFound", func(t *testing.T) {
		_, err := env.trees.List(env.ctx, nil, root, vfs.MustPath("a/nope"), 1)
		we := requireCode(t, err, wserr.FileNotFound)
		assert.Equal(t, "a/nope", we.Path)
	})
}

func TestTreesWalk(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.build(t, map[string]string{
		"a/b/c.txt": "c",
		"a/d.txt":   "dd",
		"a/e.txt":   "ee",
		"a-x":       "x",
		"z.txt":     "zzz",
	})
	walk := func(fn func(p vfs.Path, e vfs.Entry) error) ([]string, error) {
		var seen []string
		err := env.trees.Walk(env.ctx, nil, root, func(p vfs.Path, e vfs.Entry) error {
			seen = append(seen, p.String())
			return fn(p, e)
		})
		return seen, err
	}
	cases := []struct {
		name string
		fn   func(p vfs.Path, e vfs.Entry) error
		want []string
	}{
		{"OKAll", func(vfs.Path, vfs.Entry) error { return nil },
			[]string{"a", "a/b", "a/b/c.txt", "a/d.txt", "a/e.txt", "a-x", "z.txt"}},
		{"OKSkipDir", func(p vfs.Path, _ vfs.Entry) error {
			if p.String() == "a/b" {
				return fs.SkipDir
			}
			return nil
		}, []string{"a", "a/b", "a/d.txt", "a/e.txt", "a-x", "z.txt"}},
		{"OKSkipDirOnFileSkipsRestOfDir", func(p vfs.Path, _ vfs.Entry) error {
			if p.String() == "a/d.txt" {
				return fs.SkipDir
			}
			return nil
		}, []string{"a", "a/b", "a/b/c.txt", "a/d.txt", "a-x", "z.txt"}},
		{"OKSkipAll", func(p vfs.Path, _ vfs.Entry) error {
			if p.String() == "a/b/c.txt" {
				return fs.SkipAll
			}
			return nil
		}, []string{"a", "a/b", "a/b/c.txt"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			seen, err := walk(tc.fn)
			require.NoError(t, err)
			assert.Equal(t, tc.want, seen)
		})
	}
	t.Run("ErrFromCallback", func(t *testing.T) {
		stop := errors.New("stop")
		seen, err := walk(func(p vfs.Path, _ vfs.Entry) error {
			if p.String() == "a/d.txt" {
				return stop
			}
			return nil
		})
		require.ErrorIs(t, err, stop)
		assert.Equal(t, []string{"a", "a/b", "a/b/c.txt", "a/d.txt"}, seen)
	})
	t.Run("ErrCanceled", func(t *testing.T) {
		ctx, cancel := context.WithCancel(env.ctx)
		cancel()
		err := env.trees.Walk(ctx, nil, root, func(vfs.Path, vfs.Entry) error { return nil })
		require.ErrorIs(t, err, context.Canceled)
	})
}

func TestTreesConcurrentReads(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	vfs.SetTreeCacheSize(env.trees, 16)
	root := env.buildLarge(t)
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			for i := range 50 {
				p := vfs.MustPath(fmt.Sprintf("d%d/e%d/f%d/file%03d", g, i%largeMid, (i/largeMid)%largeLeaf, i))
				e, err := env.trees.Lookup(env.ctx, nil, root, p)
				if !assert.NoError(t, err) {
					return
				}
				assert.Equal(t, cas.Sum([]byte(p.String())), e.Hash)
			}
		})
	}
	wg.Wait()
}
