package vfs_test

import (
	"encoding/json"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// change is a Change in short: op and path.
type change struct{ op, path string }

func shorten(cs []vfs.Change) []change {
	out := []change{}
	for _, c := range cs {
		out = append(out, change{string(c.Op), c.Path.String()})
	}
	return out
}

func TestTreesDiff(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	base := map[string]string{
		"a.txt":               "alpha",
		"docs/readme.md":      "read me",
		"docs/guide/intro.md": "hello",
		"docs/guide/more.md":  "more",
		"node":                "a file that becomes a directory",
		"pkg/x.go":            "x",
		"pkg/sub/y.go":        "y",
	}
	baseRoot := env.build(t, base)
	cases := []struct {
		name  string
		files map[string]string
		want  []change
	}{
		{"OKEqual", base, []change{}},
		{"OKAddedModifiedDeleted", map[string]string{
			"a.txt":               "ALPHA",
			"b.txt":               "beta",
			"docs/guide/intro.md": "hello",
			"docs/guide/more.md":  "more",
			"node":                "a file that becomes a directory",
			"pkg/x.go":            "x",
			"pkg/sub/y.go":        "y",
		}, []change{
			{"modified", "a.txt"},
			{"added", "b.txt"},
			{"deleted", "docs/readme.md"},
		}},
		{"OKNested", map[string]string{
			"a.txt":               "alpha",
			"docs/readme.md":      "read me",
			"docs/guide/intro.md": "HELLO",
			"docs/guide/new/z.md": "z",
			"node":                "a file that becomes a directory",
			"pkg/x.go":            "x",
			"pkg/sub/y.go":        "y",
		}, []change{
			{"modified", "docs/guide/intro.md"},
			{"deleted", "docs/guide/more.md"},
			{"added", "docs/guide/new/z.md"},
		}},
		{"OKDirectoryAddedAndDeleted", map[string]string{
			"a.txt":          "alpha",
			"docs/readme.md": "read me",
			"node":           "a file that becomes a directory",
			"new/one":        "1",
			"new/deep/two":   "2",
		}, []change{
			{"deleted", "docs/guide/intro.md"},
			{"deleted", "docs/guide/more.md"},
			{"added", "new/deep/two"},
			{"added", "new/one"},
			{"deleted", "pkg/sub/y.go"},
			{"deleted", "pkg/x.go"},
		}},
		{"OKKindChanges", map[string]string{
			"a.txt":               "alpha",
			"docs/readme.md":      "read me",
			"docs/guide/intro.md": "hello",
			"docs/guide/more.md":  "more",
			"node/inside":         "now a directory",
			"pkg":                 "now a file",
		}, []change{
			{"deleted", "node"},
			{"added", "node/inside"},
			{"added", "pkg"},
			{"deleted", "pkg/sub/y.go"},
			{"deleted", "pkg/x.go"},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			root := env.build(t, tc.files)
			cs, err := env.trees.Diff(env.ctx, nil, baseRoot, root)
			require.NoError(t, err)
			assert.Equal(t, tc.want, shorten(cs))

			// The reverse diff swaps added and deleted; inside one
			// transaction it reads the same.
			var back []vfs.Change
			env.update(t, func(tx *index.Tx) error {
				back, err = env.trees.Diff(env.ctx, tx, root, baseRoot)
				return err
			})
			require.Len(t, back, len(cs))

			// Page by page, both ways, the changes are the same.
			for _, pair := range [][2]cas.Hash{{baseRoot, root}, {root, baseRoot}} {
				all, err := env.trees.Diff(env.ctx, nil, pair[0], pair[1])
				require.NoError(t, err)
				for _, limit := range []int{1, 2, 3} {
					assert.Equal(t, shorten(all), shorten(diffPages(t, env, pair[0], pair[1], limit)), "pages of %d", limit)
				}
			}
		})
	}

	t.Run("OKEntries", func(t *testing.T) {
		root, err := env.set(t, baseRoot, "a.txt", ptr("ALPHA"))
		require.NoError(t, err)
		root, err = env.set(t, root, "c.txt", ptr("c"))
		require.NoError(t, err)
		root, err = env.set(t, root, "pkg/x.go", nil)
		require.NoError(t, err)
		cs, err := env.trees.Diff(env.ctx, nil, baseRoot, root)
		require.NoError(t, err)
		require.Len(t, cs, 3)
		file := func(content string) vfs.Entry {
			return vfs.Entry{Kind: vfs.KindFile, Hash: cas.Sum([]byte(content)), Size: int64(len(content))}
		}
		named := func(name string, e vfs.Entry) vfs.Entry { e.Name = name; return e }
		assert.Equal(t, vfs.Change{Path: vfs.MustPath("a.txt"), Op: vfs.Modified, Old: named("a.txt", file("alpha")), New: named("a.txt", file("ALPHA"))}, cs[0])
		assert.Equal(t, vfs.Change{Path: vfs.MustPath("c.txt"), Op: vfs.Added, New: named("c.txt", file("c"))}, cs[1])
		assert.Equal(t, vfs.Change{Path: vfs.MustPath("pkg/x.go"), Op: vfs.Deleted, Old: named("x.go", file("x"))}, cs[2])

		b, err := json.Marshal(cs[1])
		require.NoError(t, err)
		assert.JSONEq(t, fmt.Sprintf(`{"path":"c.txt","op":"added","new":{"name":"c.txt","kind":"file","hash":%q,"size":1}}`, cas.Sum([]byte("c"))), string(b))
	})
	t.Run("OKFromEmptyTree", func(t *testing.T) {
		cs, err := env.trees.Diff(env.ctx, nil, vfs.EmptyTree, baseRoot)
		require.NoError(t, err)
		assert.Len(t, cs, len(base))
		for _, c := range cs {
			assert.Equal(t, vfs.Added, c.Op)
		}
	})
	t.Run("ErrCorruptMissingTree", func(t *testing.T) {
		_, err := env.trees.Diff(env.ctx, nil, baseRoot, cas.Sum([]byte("no such tree")))
		requireCode(t, err, wserr.Corrupt)
	})
}

// TestTreesDiffSkipsEqualSubtrees proves Diff never opens a subtree whose
// hash is the same on both sides, twice: by counting tree loads, and by
// deleting the unchanged subtree's rows before diffing with an empty cache.
func TestTreesDiffSkipsEqualSubtrees(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	a := env.buildLarge(t)
	b, err := env.set(t, a, "small/x.txt", ptr("x"))
	require.NoError(t, err)
	b, err = env.set(t, b, "d1/e1/f1/file001", ptr("changed"))
	require.NoError(t, err)
	want := []change{{"modified", "d1/e1/f1/file001"}, {"added", "small/x.txt"}}

	t.Run("OKCountedLoads", func(t *testing.T) {
		before := vfs.TreeLoads(env.trees)
		cs, err := env.trees.Diff(env.ctx, nil, a, b)
		require.NoError(t, err)
		assert.Equal(t, want, shorten(cs))
		// Two roots, both sides of d1, d1/e1 and d1/e1/f1, and the added
		// directory small: the other 120 trees are never opened.
		assert.Equal(t, int64(9), vfs.TreeLoads(env.trees)-before)
	})
	t.Run("OKUnchangedRowsDeleted", func(t *testing.T) {
		env.update(t, func(tx *index.Tx) error {
			// Drop every tree below d0, d2 and d3, which the change did not
			// touch; Diff must not need them.
			var gone []cas.Hash
			for _, top := range []string{"d0", "d2", "d3"} {
				err := env.trees.Walk(env.ctx, tx, a, func(p vfs.Path, e vfs.Entry) error {
					if e.Kind == vfs.KindDir && p.HasPrefix(vfs.MustPath(top)) {
						gone = append(gone, e.Hash)
					}
					return nil
				})
				require.NoError(t, err)
			}
			require.Len(t, gone, 3*(1+largeMid+largeMid*largeLeaf))
			for _, h := range gone {
				_, err := tx.ExecContext(env.ctx, `DELETE FROM trees WHERE hash = ?`, h[:])
				require.NoError(t, err)
			}
			return nil
		})
		fresh := vfs.NewTrees(env.db, env.blobs, nil)
		cs, err := fresh.Diff(env.ctx, nil, a, b)
		require.NoError(t, err)
		assert.Equal(t, want, shorten(cs))
		// The rows are really gone: a full walk of a fails.
		err = fresh.Walk(env.ctx, nil, a, func(vfs.Path, vfs.Entry) error { return nil })
		requireCode(t, err, wserr.Corrupt)
	})
}

// diffPages reads the diff from a to b a page of limit changes at a time,
// each page after the last change of the one before.
func diffPages(t *testing.T, env *treeEnv, a, b cas.Hash, limit int) []vfs.Change {
	t.Helper()
	var out []vfs.Change
	var after vfs.Path
	for range 1000 {
		page, more, err := env.trees.DiffPage(env.ctx, nil, a, b, vfs.ListPage{After: after, Limit: limit})
		require.NoError(t, err)
		out = append(out, page...)
		if !more {
			return out
		}
		require.Len(t, page, limit, "a page that says more is full")
		after = page[len(page)-1].Path
	}
	t.Fatal("the pages do not end")
	return nil
}

// TestTreesDiffPageReadsFromItsCursor: a page of a diff opens the trees on
// the way to its cursor and those its changes lie in, not the subtrees
// wholly before the cursor: the large workspace against the empty tree is
// 10,000 added files in 125 trees, and the page after d2/e3/f4/file050
// opens five.
func TestTreesDiffPageReadsFromItsCursor(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	a := env.buildLarge(t)
	fresh := vfs.NewTrees(env.db, env.blobs, nil) // nothing cached
	before := vfs.TreeLoads(fresh)
	page, more, err := fresh.DiffPage(env.ctx, nil, vfs.EmptyTree, a, vfs.ListPage{After: vfs.MustPath("d2/e3/f4/file050"), Limit: 10})
	require.NoError(t, err)
	assert.True(t, more)
	want := []change{}
	for i := 51; i <= 60; i++ {
		want = append(want, change{"added", fmt.Sprintf("d2/e3/f4/file%03d", i)})
	}
	assert.Equal(t, want, shorten(page))
	// The two roots, d2, d2/e3 and d2/e3/f4.
	assert.LessOrEqual(t, vfs.TreeLoads(fresh)-before, int64(5))

	// Past its end the page is empty; a whole diff paged is the diff.
	page, more, err = fresh.DiffPage(env.ctx, nil, vfs.EmptyTree, a, vfs.ListPage{After: vfs.MustPath("d3/e4/f4/file099"), Limit: 10})
	require.NoError(t, err)
	assert.Empty(t, page)
	assert.False(t, more)
	assert.Len(t, diffPages(t, env, vfs.EmptyTree, a, 997), largeTop*largeMid*largeLeaf*largeFiles)
}
