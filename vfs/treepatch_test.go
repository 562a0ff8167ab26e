package vfs_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

// randomEntries returns a sorted, valid set of entries named from a small
// alphabet, so that two sets share many names.
func randomEntries(r *rand.Rand) []vfs.Entry {
	var es []vfs.Entry
	for i := range 40 {
		if r.IntN(3) == 0 {
			continue
		}
		k := vfs.KindFile
		if r.IntN(4) == 0 {
			k = vfs.KindDir
		}
		es = append(es, vfs.Entry{
			Name: fmt.Sprintf("n%02d", i),
			Kind: k,
			Hash: cas.Sum([]byte{byte(r.IntN(3))}),
			Size: int64(r.IntN(3)),
		})
	}
	return es
}

func TestTreePatchRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 500 {
		old, cur := randomEntries(r), randomEntries(r)
		p := vfs.EncodeTreePatch(old, cur)
		got, err := vfs.ApplyTreePatch(old, p)
		require.NoError(t, err, "case %d", i)
		if len(cur) == 0 {
			assert.Empty(t, got, "case %d", i)
		} else {
			assert.Equal(t, cur, got, "case %d", i)
		}
	}
}

func TestTreePatchRefusesWhatItNeverWrites(t *testing.T) {
	base := []vfs.Entry{
		{Name: "a", Kind: vfs.KindFile, Hash: cas.Sum([]byte("a")), Size: 1},
		{Name: "c", Kind: vfs.KindFile, Hash: cas.Sum([]byte("c")), Size: 1},
	}
	withB := append(slices.Clone(base), vfs.Entry{Name: "b", Kind: vfs.KindFile, Hash: cas.Sum([]byte("b")), Size: 1})
	slices.SortFunc(withB, func(x, y vfs.Entry) int { return strings.Compare(x.Name, y.Name) })
	addB := vfs.EncodeTreePatch(base, withB)
	delA := vfs.EncodeTreePatch(base, base[1:])
	cases := []struct {
		name  string
		patch []byte
	}{
		{"ErrEmpty", nil},
		{"ErrVersion", append([]byte{9}, addB[1:]...)},
		{"ErrTruncatedHash", addB[:len(addB)-10]},
		{"ErrDeletesMissing", vfs.EncodeTreePatch(withB, base)[:0:0]},
		{"ErrUnsorted", append(slices.Clone(addB), delA[2:]...)},
		{"ErrSeqZero", append([]byte{1, 0}, addB[2:]...)},
		{"ErrNoChange", vfs.EncodeTreePatch(nil, base[:1])},
		{"ErrBadKind", append([]byte{1, 1, 7}, addB[3:]...)},
	}
	// ErrDeletesMissing: a patch deleting "b" applied to a base without it.
	cases[3].patch = vfs.EncodeTreePatch(withB, base)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			b := base
			_, err := vfs.ApplyTreePatch(b, tc.patch)
			requireCode(t, err, wserr.Corrupt)
		})
	}
}

// maxChain returns the longest patch chain stored, following base columns.
func (env *treeEnv) maxChain(tb testing.TB) int {
	tb.Helper()
	var n int
	require.NoError(tb, env.db.View(env.ctx, func(tx *index.Tx) error {
		return tx.GetContext(env.ctx, &n, `
			WITH RECURSIVE chain (hash, base, depth) AS (
				SELECT hash, base, 0 FROM trees WHERE base IS NULL
				UNION ALL
				SELECT t.hash, t.base, c.depth + 1 FROM trees t JOIN chain c ON t.base = c.hash
			)
			SELECT coalesce(max(depth), 0) FROM chain`)
	}))
	return n
}

// storedBytes returns the bytes of all tree rows.
func (env *treeEnv) storedBytes(tb testing.TB) int64 {
	tb.Helper()
	var n int64
	require.NoError(tb, env.db.View(env.ctx, func(tx *index.Tx) error {
		return tx.GetContext(env.ctx, &n, `SELECT coalesce(sum(length(data) + coalesce(length(base), 0)), 0) FROM trees`)
	}))
	return n
}

// TestTreeWriteCostsTheChangeNotTheDirectory: a write into a directory of
// 1,000 files stores bytes for the one entry it changes, not the 1,000.
func TestTreeWriteCostsTheChangeNotTheDirectory(t *testing.T) {
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "Set", true: "SetFiles"}[batch], func(t *testing.T) {
			env := newTreeEnv(t, cas.Options{})
			var root cas.Hash
			env.update(t, func(tx *index.Tx) error {
				var cs []vfs.FileChange
				for i := range 1000 {
					cs = append(cs, vfs.FileChange{Path: vfs.MustPath(fmt.Sprintf("src/wide/file%04d.go", i)),
						Entry: &vfs.Entry{Kind: vfs.KindFile, Hash: cas.Sum(fmt.Appendf(nil, "%d", i)), Size: 100}})
				}
				var err error
				root, err = env.trees.SetFiles(env.ctx, tx, vfs.EmptyTree, cs)
				return err
			})
			whole := env.storedBytes(t)
			require.Greater(t, whole, int64(1000*40), "the first version of src/wide is stored whole")

			// 300 writes cross one turn of the skip-delta numbering (256),
			// where src/wide is stored whole again.
			const writes = 300
			for i := range writes {
				p := vfs.MustPath(fmt.Sprintf("src/wide/file%04d.go", i*37%1000))
				e := vfs.Entry{Kind: vfs.KindFile, Hash: cas.Sum(fmt.Appendf(nil, "v2 %d", i)), Size: 200}
				env.update(t, func(tx *index.Tx) error {
					var err error
					if batch {
						root, err = env.trees.SetFiles(env.ctx, tx, root, []vfs.FileChange{{Path: p, Entry: &e}})
					} else {
						root, err = env.trees.Set(env.ctx, tx, root, p, &e)
					}
					return err
				})
			}
			// Each write stores three trees (src/wide, src, the root);
			// stored whole, src/wide alone would take the whole first
			// version every time.
			perWrite := (env.storedBytes(t) - whole) / writes
			t.Logf("%d bytes of trees per write into a directory whose whole encoding takes %d", perWrite, whole)
			assert.Less(t, perWrite, whole/20)
			var wholes int
			require.NoError(t, env.db.View(env.ctx, func(tx *index.Tx) error {
				return tx.GetContext(env.ctx, &wholes, `SELECT count(*) FROM trees WHERE base IS NULL AND length(data) > 40000`)
			}))
			assert.Equal(t, 2, wholes, "src/wide whole at its first version and again at 256")
			assert.LessOrEqual(t, env.maxChain(t), vfs.MaxPatchDepth)

			// A cold Trees reads every file back through the chains.
			cold := vfs.NewTrees(env.db, env.blobs, nil)
			es, err := cold.Entries(env.ctx, nil, mustLookup(t, env, cold, root, "src/wide").Hash)
			require.NoError(t, err)
			require.Len(t, es, 1000)
			for i := range writes {
				j := i * 37 % 1000
				assert.Equal(t, cas.Sum(fmt.Appendf(nil, "v2 %d", i)), es[j].Hash, es[j].Name)
			}
		})
	}
}

func mustLookup(tb testing.TB, env *treeEnv, trees *vfs.Trees, root cas.Hash, p string) vfs.Entry {
	tb.Helper()
	e, err := trees.Lookup(env.ctx, nil, root, vfs.MustPath(p))
	require.NoError(tb, err)
	return e
}

// TestTreePatchHistoryReadsBack: every root of a long random history of
// writes and deletes reads back, from a cold cache, exactly as a model
// says, and no chain outgrows the bound.
func TestTreePatchHistoryReadsBack(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	r := rand.New(rand.NewPCG(3, 4))
	model := map[string]string{}
	root := vfs.EmptyTree
	type version struct {
		root  cas.Hash
		files map[string]string
	}
	var history []version
	for i := range 300 {
		p := fmt.Sprintf("d%d/f%d.md", r.IntN(3), r.IntN(12))
		if _, ok := model[p]; ok && r.IntN(4) == 0 {
			var err error
			root, err = env.set(t, root, p, nil)
			require.NoError(t, err)
			delete(model, p)
		} else {
			c := fmt.Sprintf("content %d", i)
			var err error
			root, err = env.set(t, root, p, &c)
			require.NoError(t, err)
			model[p] = c
		}
		history = append(history, version{root, maps.Clone(model)})
	}
	assert.LessOrEqual(t, env.maxChain(t), vfs.MaxPatchDepth)
	var patched int
	require.NoError(t, env.db.View(env.ctx, func(tx *index.Tx) error {
		return tx.GetContext(env.ctx, &patched, `SELECT count(*) FROM trees WHERE base IS NOT NULL`)
	}))
	assert.Greater(t, patched, 300, "most new versions of a directory are patches")

	cold := newTreeEnv(t, cas.Options{})
	cold.db, cold.blobs = env.db, env.blobs
	cold.trees = vfs.NewTrees(env.db, env.blobs, nil)
	for i := len(history) - 1; i >= 0; i-- {
		assert.Equal(t, history[i].files, cold.files(t, history[i].root), "version %d", i)
	}
}

// TestTreePatchBrokenBase: a patch whose base is missing or damaged fails
// with wserr.Corrupt naming the base, never returns other entries.
func TestTreePatchBrokenBase(t *testing.T) {
	for _, tc := range []struct{ name, damage, want string }{
		{"ErrBaseMissing", `DELETE FROM trees WHERE hash = ?`, "missing"},
		{"ErrBaseDamaged", `UPDATE trees SET data = CAST(data || x'00' AS BLOB) WHERE hash = ?`, "patch base"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env := newTreeEnv(t, cas.Options{})
			root := env.build(t, map[string]string{"a.md": "a", "b.md": "b", "c.md": "c"})
			next, err := env.set(t, root, "b.md", ptr("b2"))
			require.NoError(t, err)
			var base []byte
			require.NoError(t, env.db.View(env.ctx, func(tx *index.Tx) error {
				return tx.GetContext(env.ctx, &base, `SELECT base FROM trees WHERE hash = ?`, next[:])
			}))
			require.Equal(t, root[:], base, "the new root is a patch on the old")
			env.update(t, func(tx *index.Tx) error {
				_, err := tx.ExecContext(env.ctx, tc.damage, root[:])
				return err
			})

			_, err = vfs.NewTrees(env.db, env.blobs, nil).Entries(env.ctx, nil, next)
			we := requireCode(t, err, wserr.Corrupt)
			assert.Contains(t, we.Error(), tc.want)
			assert.Contains(t, we.Error(), root.String()[:12])
			// Leave a sound store for the integrity check at cleanup.
			env.update(t, func(tx *index.Tx) error {
				_, err := tx.ExecContext(env.ctx, `DELETE FROM trees`)
				return err
			})
		})
	}
}

// FuzzApplyTreePatch: no patch bytes make applyPatch panic, and whatever it
// accepts is a valid tree (it encodes, sorted, with no duplicate).
func FuzzApplyTreePatch(f *testing.F) {
	r := rand.New(rand.NewPCG(5, 6))
	base := randomEntries(r)
	for range 8 {
		f.Add(vfs.EncodeTreePatch(base, randomEntries(r)))
	}
	f.Add([]byte{1, 1, 0, 3, 'n', '0', '1'})
	f.Fuzz(func(t *testing.T, patch []byte) {
		es, err := vfs.ApplyTreePatch(base, patch)
		if err != nil {
			requireCode(t, err, wserr.Corrupt)
			return
		}
		data, err := vfs.EncodeTree(es)
		require.NoError(t, err)
		back, err := vfs.DecodeTree(data)
		require.NoError(t, err)
		if len(es) > 0 {
			assert.Equal(t, es, back)
		}
	})
}

// TestTreePatchHistoriesMeetAtOneTree: two histories of a directory reach
// the same content at different places (patch 4 of one, patch 2 of the
// other, both against version 0). The tree keeps the place it was stored
// at first, the next version is numbered from that place, and every tree
// reads back from a cold cache.
func TestTreePatchHistoriesMeetAtOneTree(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	batch := map[string]*string{}
	for i := range 10 {
		batch[fmt.Sprintf("d/f%d", i)] = ptr("0")
	}
	r0, err := env.setFiles(t, vfs.EmptyTree, batch)
	require.NoError(t, err)
	rA := r0
	for i, c := range []string{"a1", "a2", "a3", "a4"} {
		rA, err = env.set(t, rA, fmt.Sprintf("d/f%d", i), &c)
		require.NoError(t, err)
	}
	r1, err := env.set(t, r0, "d/f0", ptr("a1"))
	require.NoError(t, err)
	rB, err := env.setFiles(t, r1, map[string]*string{"d/f1": ptr("a2"), "d/f2": ptr("a3"), "d/f3": ptr("a4")})
	require.NoError(t, err)
	require.Equal(t, rA, rB, "the two histories meet")
	rN, err := env.set(t, rB, "d/f4", ptr("b"))
	require.NoError(t, err)

	cold := newTreeEnv(t, cas.Options{})
	cold.db, cold.blobs = env.db, env.blobs
	cold.trees = vfs.NewTrees(env.db, env.blobs, nil)
	for _, root := range []cas.Hash{r0, r1, rA, rN} {
		_, err := cold.trees.List(env.ctx, nil, root, vfs.Root(), 0)
		require.NoError(t, err)
	}
	assert.Equal(t, "b", cold.files(t, rN)["d/f4"])
	assert.LessOrEqual(t, env.maxChain(t), vfs.MaxPatchDepth)
}

// TestTreePatchBaseCheckedAgainstRows: a Trees whose cache holds a tree's
// old place in a history (another handle collected the chain and stored
// the tree again, whole) still writes a sound patch: the base it finds
// through the cache is checked against the rows, and the chain is read
// from them when they disagree.
func TestTreePatchBaseCheckedAgainstRows(t *testing.T) {
	env := newTreeEnv(t, cas.Options{})
	// d: version 0 (whole) to 4 (a patch against 0).
	root, err := env.setFiles(t, vfs.EmptyTree, map[string]*string{"d/a": ptr("1"), "d/b": ptr("1"), "d/c": ptr("1")})
	require.NoError(t, err)
	for _, c := range []string{"2", "3", "4", "5"} {
		root, err = env.set(t, root, "d/a", ptr(c))
		require.NoError(t, err)
	}
	d := mustLookup(t, env, env.trees, root, "d")
	es, err := env.trees.Entries(env.ctx, nil, d.Hash)
	require.NoError(t, err)
	// Another handle: every tree goes, then d and the root come back
	// whole.
	other := vfs.NewTrees(env.db, env.blobs, nil)
	env.update(t, func(tx *index.Tx) error {
		if _, err := tx.ExecContext(env.ctx, `DELETE FROM trees`); err != nil {
			return err
		}
		h, err := other.Put(env.ctx, tx, es)
		require.Equal(t, d.Hash, h)
		if err != nil {
			return err
		}
		h, err = other.Put(env.ctx, tx, []vfs.Entry{d})
		require.Equal(t, root, h)
		return err
	})

	// The cache says d is version 4, so the next is 5 against d itself;
	// its row says d is whole, so the next is version 1.
	next, err := env.set(t, root, "d/b", ptr("2"))
	require.NoError(t, err)
	var data []byte
	require.NoError(t, env.db.View(env.ctx, func(tx *index.Tx) error {
		return tx.GetContext(env.ctx, &data, `SELECT data FROM trees WHERE base = ?`, d.Hash[:])
	}))
	n, err := vfs.PatchNumber(data)
	require.NoError(t, err)
	assert.Equal(t, 1, n, "numbered from the row's place, not the cache's")
	cold := vfs.NewTrees(env.db, env.blobs, nil)
	got, err := cold.Entries(env.ctx, nil, mustLookup(t, env, cold, next, "d").Hash)
	require.NoError(t, err)
	require.Len(t, got, 3)
	assert.Equal(t, cas.Sum([]byte("2")), got[1].Hash)
	var dangling int
	require.NoError(t, env.db.View(env.ctx, func(tx *index.Tx) error {
		return tx.GetContext(env.ctx, &dangling, `SELECT count(*) FROM trees t WHERE base IS NOT NULL
			AND NOT EXISTS (SELECT 1 FROM trees b WHERE b.hash = t.base)`)
	}))
	assert.Zero(t, dangling)
}
