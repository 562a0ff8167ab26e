package vfs_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
)

// TestTreeRefsListEveryRow: whatever stores the trees (Set at every depth,
// SetFiles over more directories than one statement lists, Put), the
// tree_refs rows are exactly what every stored tree row names, though a
// change lists the refs of all its trees together.
func TestTreeRefsListEveryRow(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	root := env.build(t, map[string]string{"a.md": "a", "output/main.md": "m", "output/ch1/draft.md": "d"})
	for i := range 12 {
		c := fmt.Sprintf("version %d", i)
		var err error
		root, err = env.set(t, root, []string{"output/main.md", "output/ch1/draft.md", "b.md"}[i%3], &c)
		require.NoError(t, err)
	}
	env.update(t, func(tx *index.Tx) error {
		var cs []vfs.FileChange
		for i := range vfs.RefBatchMax + 40 {
			e := env.file(t, tx, fmt.Sprintf("file %d", i))
			cs = append(cs, vfs.FileChange{Path: vfs.MustPath(fmt.Sprintf("output/d%03d/f.md", i)), Entry: &e})
		}
		var err error
		root, err = env.trees.SetFiles(env.ctx, tx, root, cs)
		require.NoError(t, err)
		e := env.file(t, tx, "alone")
		_, err = env.trees.Put(env.ctx, tx, []vfs.Entry{{Name: "x", Kind: vfs.KindFile, Hash: e.Hash, Size: e.Size}})
		return err
	})
	type pair struct {
		Child  int64  `db:"child"`
		Parent []byte `db:"parent"`
	}
	var rows []struct {
		Hash []byte `db:"hash"`
		Data []byte `db:"data"`
		Base []byte `db:"base"`
	}
	var listed []pair
	require.NoError(t, env.db.View(env.ctx, func(tx *index.Tx) error {
		if err := tx.SelectContext(env.ctx, &rows, `SELECT hash, data, base FROM trees`); err != nil {
			return err
		}
		return tx.SelectContext(env.ctx, &listed, `SELECT child, parent FROM tree_refs`)
	}))
	want := map[string]bool{}
	for _, r := range rows {
		keys, err := vfs.RowRefKeys(r.Data, r.Base)
		require.NoError(t, err)
		for _, k := range keys {
			want[fmt.Sprintf("%d %x", k, r.Hash)] = true
		}
	}
	got := map[string]bool{}
	for _, p := range listed {
		got[fmt.Sprintf("%d %x", p.Child, p.Parent)] = true
	}
	assert.Greater(t, len(want), vfs.RefBatchMax)
	assert.Equal(t, want, got)
}
