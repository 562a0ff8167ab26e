package vfs_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// setFiles applies a batch (content nil deletes) in one transaction.
func (env *treeEnv) setFiles(tb testing.TB, root cas.Hash, batch map[string]*string) (cas.Hash, error) {
	tb.Helper()
	var out cas.Hash
	err := env.db.Update(env.ctx, func(tx *index.Tx) error {
		var cs []vfs.FileChange
		for p, content := range batch {
			c := vfs.FileChange{Path: vfs.MustPath(p)}
			if content != nil {
				e := env.file(tb, tx, *content)
				c.Entry = &e
			}
			cs = append(cs, c)
		}
		var err error
		out, err = env.trees.SetFiles(env.ctx, tx, root, cs)
		return err
	})
	return out, err
}

// TestSetFilesMatchesSet: a batch gives the same root as the same changes
// made one by one with Set, for random batches over a random tree.
func TestSetFilesMatchesSet(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	r := rand.New(rand.NewPCG(3, 3))
	files := map[string]string{}
	for i := range 60 {
		files[fmt.Sprintf("d%d/e%d/f%d.txt", r.IntN(4), r.IntN(3), i)] = fmt.Sprint("v", i)
	}
	root := env.build(t, files)
	for round := range 30 {
		batch := map[string]*string{}
		want := maps.Clone(files)
		for p := range files {
			if r.IntN(6) == 0 {
				batch[p] = nil
				delete(want, p)
			} else if r.IntN(6) == 0 {
				batch[p] = ptr(fmt.Sprint("changed ", round))
				want[p] = *batch[p]
			}
		}
		for i := range r.IntN(5) {
			p := fmt.Sprintf("d%d/new%d/g%d-%d.txt", r.IntN(5), r.IntN(2), round, i)
			batch[p] = ptr("new")
			want[p] = "new"
		}
		oneByOne := root
		for p, c := range batch {
			var err error
			oneByOne, err = env.set(t, oneByOne, p, c)
			require.NoError(t, err)
		}
		got, err := env.setFiles(t, root, batch)
		require.NoError(t, err)
		require.Equal(t, oneByOne, got, "round %d", round)
		require.Equal(t, want, env.files(t, got))
		root, files = got, want
	}
}

// TestSetFilesWritesEachDirectoryOnce: importing 500 files into 25
// directories writes 25 + 2 trees, where one Set per file writes a new
// version of the parent directories for every file.
func TestSetFilesWritesEachDirectoryOnce(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	batch := map[string]*string{}
	for i := range 500 {
		batch[fmt.Sprintf("src/d%02d/f%03d.go", i%25, i)] = ptr(fmt.Sprint("package p // ", i))
	}
	before := env.treeRows(t)
	root, err := env.setFiles(t, vfs.EmptyTree, batch)
	require.NoError(t, err)
	assert.Equal(t, 25+2, env.treeRows(t)-before, "25 leaf directories, src/ and the root")
	assert.Len(t, env.files(t, root), 500)
}

func TestSetFilesErrors(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.build(t, map[string]string{"a/b.txt": "b", "f.txt": "f"})
	cases := map[string]struct {
		batch map[string]*string
		code  wserr.Code
	}{
		"ErrDeleteMissing":     {map[string]*string{"a/none.txt": nil, "a/c.txt": ptr("c")}, wserr.FileNotFound},
		"ErrDeleteMissingDir":  {map[string]*string{"z/none.txt": nil}, wserr.FileNotFound},
		"ErrFileInTheWay":      {map[string]*string{"f.txt/x": ptr("x")}, wserr.NotADirectory},
		"ErrDirectoryInTheWay": {map[string]*string{"a": ptr("x")}, wserr.PathIsDirectory},
		"ErrDeleteDirectory":   {map[string]*string{"a": nil}, wserr.PathIsDirectory},
		"ErrNested":            {map[string]*string{"n/x": ptr("1"), "n/x/y": ptr("2")}, wserr.InvalidArgument},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			before := env.treeRows(t)
			_, err := env.setFiles(t, root, c.batch)
			requireCode(t, err, c.code)
			assert.Equal(t, before, env.treeRows(t), "a failed batch writes no tree")
		})
	}
	t.Run("EmptyBatch", func(t *testing.T) {
		got, err := env.setFiles(t, root, nil)
		require.NoError(t, err)
		assert.Equal(t, root, got)
	})
	t.Run("DeleteLastFileRemovesDirectory", func(t *testing.T) {
		got, err := env.setFiles(t, root, map[string]*string{"a/b.txt": nil})
		require.NoError(t, err)
		assert.Equal(t, map[string]string{"f.txt": "f"}, env.files(t, got))
	})
}
