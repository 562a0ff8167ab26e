package vfs_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
)

// listPaths is the paths of ls.
func listPaths(ls []vfs.Listed) []string {
	out := make([]string, len(ls))
	for i, l := range ls {
		out[i] = l.Path.String()
	}
	return out
}

// afterCursor is the paths of full that come after cursor, segment by
// segment, as a page's listing takes them.
func afterCursor(full []string, cursor string) []string {
	out := []string{}
	for _, p := range full {
		if slices.Compare(strings.Split(p, "/"), strings.Split(cursor, "/")) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// TestTreesListPage: read page by page from the start, a listing is the
// whole List, whatever the page size; a page after any cursor (an entry,
// a name between entries, one past a file) holds the entries List gives
// after it.
func TestTreesListPage(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.buildLarge(t)
	for _, c := range []struct {
		dir   string
		depth int
	}{{"", 1}, {"", 2}, {"", 4}, {"d1", 3}, {"d1/e2", 0}, {"d1/e2/f3/file007", 1}} {
		dir := vfs.Root()
		if c.dir != "" {
			dir = vfs.MustPath(c.dir)
		}
		whole, err := env.trees.List(env.ctx, nil, root, dir, c.depth)
		require.NoError(t, err)
		full := listPaths(whole)
		for _, limit := range []int{1, 7, 100, 0} {
			t.Run(fmt.Sprintf("%s/depth%d/limit%d", c.dir, c.depth, limit), func(t *testing.T) {
				var got []string
				page := vfs.ListPage{Limit: limit}
				for {
					ls, more, err := env.trees.ListPage(env.ctx, nil, root, dir, c.depth, page)
					require.NoError(t, err)
					if limit > 0 {
						require.LessOrEqual(t, len(ls), limit)
					}
					got = append(got, listPaths(ls)...)
					if !more {
						break
					}
					require.NotEmpty(t, ls, "a page with more to come holds entries")
					page.After = ls[len(ls)-1].Path
				}
				assert.Equal(t, full, got)
			})
		}
	}
	whole, err := env.trees.List(env.ctx, nil, root, vfs.Root(), 4)
	require.NoError(t, err)
	full := listPaths(whole)
	for _, cursor := range []string{"a", "d1", "d1/e2", "d1/e2/f3/file050", "d1/e2/f3/file050/below",
		"d1/e2/f3/file0505", "d1/e2/f", "d1/e2/f9", "d3/e4/f4/file099", "d9", "zz"} {
		t.Run("After/"+cursor, func(t *testing.T) {
			want := afterCursor(full, cursor)
			ls, more, err := env.trees.ListPage(env.ctx, nil, root, vfs.Root(), 4, vfs.ListPage{After: vfs.MustPath(cursor), Limit: 5})
			require.NoError(t, err)
			assert.Equal(t, want[:min(5, len(want))], listPaths(ls))
			assert.Equal(t, len(want) > 5, more)
		})
	}
}

// TestTreesListPageReadsItsWay counts tree loads: a page deep in a large
// tree reads the directories on the way to its cursor and those it lists,
// not the 120 before the cursor a whole listing reads.
func TestTreesListPageReadsItsWay(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.buildLarge(t)
	fresh := vfs.NewTrees(env.db, env.blobs, nil)
	before := vfs.TreeLoads(fresh)
	ls, more, err := fresh.ListPage(env.ctx, nil, root, vfs.Root(), 4, vfs.ListPage{After: vfs.MustPath("d3/e4/f3/file090"), Limit: 20})
	require.NoError(t, err)
	require.True(t, more)
	assert.Equal(t, "d3/e4/f3/file091", ls[0].Path.String())
	assert.Equal(t, "d3/e4/f4/file009", ls[19].Path.String())
	// the root (twice: to find the directory listed, and to list it), d3,
	// d3/e4, d3/e4/f3 and d3/e4/f4
	assert.Equal(t, int64(6), vfs.TreeLoads(fresh)-before)

	before = vfs.TreeLoads(fresh)
	_, err = fresh.List(env.ctx, nil, root, vfs.Root(), 4)
	require.NoError(t, err)
	assert.Equal(t, int64(2+largeTop*(1+largeMid*(1+largeLeaf))), vfs.TreeLoads(fresh)-before, "a whole listing reads every tree")
}

// TestListPageAfterStoredBeforeRules pages through a directory holding
// names stored before the rules about other platforms' special names: a
// host asks for the next page after the last path it was given, whichever
// name that is.
func TestListPageAfterStoredBeforeRules(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	names := namesBeforeRules
	var root cas.Hash
	env.update(t, func(tx *index.Tx) error {
		_, root = putBeforeRules(t, env, tx)
		return nil
	})
	var got []string
	page, err := vfs.ParseListPage("", 1)
	require.NoError(t, err)
	for range names {
		ls, more, err := env.trees.ListPage(env.ctx, nil, root, vfs.Root(), 1, page)
		require.NoError(t, err)
		require.Len(t, ls, 1)
		got = append(got, ls[0].Path.String())
		if !more {
			break
		}
		page, err = vfs.ParseListPage(ls[0].Path.String(), 1)
		require.NoError(t, err, "the next page after %q", ls[0].Path)
	}
	assert.Equal(t, names, got)
}
