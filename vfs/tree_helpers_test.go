package vfs_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// treeEnv is a store with a Trees on it, checked for integrity when the
// test ends.
type treeEnv struct {
	ctx   context.Context
	db    *index.DB
	blobs *cas.Store
	trees *vfs.Trees
	clock time.Time
}

func newTreeEnv(tb testing.TB, opts cas.Options) *treeEnv {
	tb.Helper()
	db, blobs := storetest.OpenCAS(tb, opts)
	env := &treeEnv{ctx: context.Background(), db: db, blobs: blobs, clock: time.Unix(1_000, 0)}
	env.trees = vfs.NewTrees(db, blobs, func() time.Time { return env.clock })
	return env
}

// update runs fn in a write transaction that must commit.
func (env *treeEnv) update(tb testing.TB, fn func(tx *index.Tx) error) {
	tb.Helper()
	require.NoError(tb, env.db.Update(env.ctx, fn))
}

// file stores content as a blob in tx and returns its file entry.
func (env *treeEnv) file(tb testing.TB, tx *index.Tx, content string) vfs.Entry {
	tb.Helper()
	h, err := env.blobs.PutBytes(env.ctx, tx, []byte(content))
	require.NoError(tb, err)
	return vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: int64(len(content))}
}

// build returns the root of a tree holding files (path → content), written
// with Set from the empty tree.
func (env *treeEnv) build(tb testing.TB, files map[string]string) cas.Hash {
	tb.Helper()
	root := vfs.EmptyTree
	env.update(tb, func(tx *index.Tx) error {
		for _, p := range slices.Sorted(maps.Keys(files)) {
			e := env.file(tb, tx, files[p])
			var err error
			root, err = env.trees.Set(env.ctx, tx, root, vfs.MustPath(p), &e)
			require.NoError(tb, err, p)
		}
		return nil
	})
	return root
}

// set writes or (content nil) deletes one file in its own transaction.
func (env *treeEnv) set(tb testing.TB, root cas.Hash, p string, content *string) (cas.Hash, error) {
	tb.Helper()
	var out cas.Hash
	err := env.db.Update(env.ctx, func(tx *index.Tx) error {
		var e *vfs.Entry
		if content != nil {
			fe := env.file(tb, tx, *content)
			e = &fe
		}
		var err error
		out, err = env.trees.Set(env.ctx, tx, root, vfs.MustPath(p), e)
		return err
	})
	return out, err
}

// files returns every file of root as path → content, read through Walk.
func (env *treeEnv) files(tb testing.TB, root cas.Hash) map[string]string {
	tb.Helper()
	out := map[string]string{}
	err := env.trees.Walk(env.ctx, nil, root, func(p vfs.Path, e vfs.Entry) error {
		if e.Kind == vfs.KindFile {
			b, err := env.blobs.ReadAll(env.ctx, e.Hash)
			if err != nil {
				return err
			}
			out[p.String()] = string(b)
		}
		return nil
	})
	require.NoError(tb, err)
	return out
}

// treeRows counts the rows of the trees table.
func (env *treeEnv) treeRows(tb testing.TB) int {
	tb.Helper()
	var n int
	require.NoError(tb, env.db.View(env.ctx, func(tx *index.Tx) error {
		return tx.GetContext(env.ctx, &n, `SELECT count(*) FROM trees`)
	}))
	return n
}

// requireCode checks that err is a *wserr.Error with code c and returns it.
func requireCode(tb testing.TB, err error, c wserr.Code) *wserr.Error {
	tb.Helper()
	require.Error(tb, err)
	var we *wserr.Error
	require.True(tb, errors.As(err, &we), "error %v (%T) is not a *wserr.Error", err, err)
	require.Equal(tb, c, we.Code, "error: %v", err)
	return we
}

func ptr[T any](v T) *T { return &v }

// Large workspace layout: d0..d3 / e0..e4 / f0..f4 / file000..file099, so
// 100 leaf directories of 100 files, 10,000 files, each three directories
// deep.
const (
	largeTop, largeMid, largeLeaf, largeFiles = 4, 5, 5, 100
)

// buildLarge writes the large workspace bottom-up with Put, one tree per
// directory (125 trees), and returns its root. File hashes are addresses of
// the file names; trees never read blobs, so no blob is stored.
func (env *treeEnv) buildLarge(tb testing.TB) cas.Hash {
	tb.Helper()
	var root cas.Hash
	env.update(tb, func(tx *index.Tx) error {
		put := func(es []vfs.Entry) vfs.Entry {
			h, err := env.trees.Put(env.ctx, tx, es)
			require.NoError(tb, err)
			var size int64
			for _, e := range es {
				size += e.Size
			}
			return vfs.Entry{Kind: vfs.KindDir, Hash: h, Size: size}
		}
		var tops []vfs.Entry
		for a := range largeTop {
			var mids []vfs.Entry
			for b := range largeMid {
				var leaves []vfs.Entry
				for c := range largeLeaf {
					files := make([]vfs.Entry, largeFiles)
					for i := range files {
						name := fmt.Sprintf("d%d/e%d/f%d/file%03d", a, b, c, i)
						files[i] = vfs.Entry{Name: fmt.Sprintf("file%03d", i), Kind: vfs.KindFile, Hash: cas.Sum([]byte(name)), Size: 10}
					}
					leaf := put(files)
					leaf.Name = fmt.Sprintf("f%d", c)
					leaves = append(leaves, leaf)
				}
				mid := put(leaves)
				mid.Name = fmt.Sprintf("e%d", b)
				mids = append(mids, mid)
			}
			top := put(mids)
			top.Name = fmt.Sprintf("d%d", a)
			tops = append(tops, top)
		}
		root = put(tops).Hash
		return nil
	})
	return root
}

// namesBeforeRules are names ParsePath has come to refuse (a device name,
// NFD, a trailing dot), which trees stored before those rules may hold,
// and one it takes.
var namesBeforeRules = []string{"aux.md", "caf\u0065\u0301.md", "notes.", "ok.md"}

// putBeforeRules stores, in tx, a directory of files named
// namesBeforeRules, each holding "content of " and its name, and returns
// its entries and address.
func putBeforeRules(t *testing.T, env *treeEnv, tx *index.Tx) ([]vfs.Entry, cas.Hash) {
	t.Helper()
	var files []vfs.Entry
	for _, n := range namesBeforeRules {
		e := env.file(t, tx, "content of "+n)
		e.Name = n
		files = append(files, e)
	}
	dir, err := env.trees.Put(env.ctx, tx, files)
	require.NoError(t, err)
	return files, dir
}
