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

// TestCandidatePlaces: a candidate a deletion records comes after every
// place given out before, even once the candidates at the end of the queue
// were taken; one recorded with a place keeps it; recording a queued
// candidate again moves it to the later place; and a span takes only its
// own candidates, leaving the rest queued.
func TestCandidatePlaces(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	tree := func(i int) vfs.Candidate {
		return vfs.Candidate{Kind: vfs.CandidateTree, Hash: cas.Sum(fmt.Appendf(nil, "tree %d", i))}
	}
	now := env.clock.UnixNano()
	var end0, end1, end2 int64
	var own, rest []vfs.Candidate
	env.update(t, func(tx *index.Tx) error {
		var err error
		end0, err = env.trees.CandidatesEnd(env.ctx, tx)
		require.NoError(t, err)
		require.NoError(t, env.trees.AddCandidates(env.ctx, tx, []vfs.Candidate{tree(1), tree(2), tree(3)}, now))
		end1, err = env.trees.CandidatesEnd(env.ctx, tx)
		require.NoError(t, err)
		assert.Equal(t, end0+3, end1)
		// The end of the queue taken: the next place is still later.
		taken, err := env.trees.TakeCandidatesIn(env.ctx, tx, vfs.QueueSpan{After: end1 - 1, Upto: end1}, now, 10)
		require.NoError(t, err)
		assert.Equal(t, []vfs.Candidate{{Kind: vfs.CandidateTree, Hash: tree(3).Hash, Seq: end1}}, taken)
		require.NoError(t, env.trees.AddCandidates(env.ctx, tx, []vfs.Candidate{tree(4), tree(1)}, now))
		end2, err = env.trees.CandidatesEnd(env.ctx, tx)
		require.NoError(t, err)
		assert.Equal(t, end1+2, end2, "no place is given twice")
		// What a collection records keeps the place it came from.
		require.NoError(t, env.trees.AddCandidates(env.ctx, tx, []vfs.Candidate{{Kind: vfs.CandidateBlob, Hash: tree(5).Hash, Seq: end1}}, now))
		own, err = env.trees.TakeCandidatesIn(env.ctx, tx, vfs.QueueSpan{After: end1, Upto: end2}, now, 10)
		require.NoError(t, err)
		rest, err = env.trees.TakeCandidates(env.ctx, tx, now, 10)
		return err
	})
	seqs := map[cas.Hash]int64{}
	for _, c := range own {
		seqs[c.Hash] = c.Seq
	}
	assert.Equal(t, map[cas.Hash]int64{tree(4).Hash: end1 + 1, tree(1).Hash: end1 + 2}, seqs,
		"the span holds what was recorded in it, tree 1 again included")
	seqs = map[cas.Hash]int64{}
	for _, c := range rest {
		seqs[c.Hash] = c.Seq
	}
	assert.Equal(t, map[cas.Hash]int64{tree(2).Hash: end0 + 2, tree(5).Hash: end1}, seqs)
}
