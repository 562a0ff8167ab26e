package wsstore_test

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/vfs"
)

// setEntry writes, in one transaction, the run's live tree with the file
// entry e at p (its size as given, not checked), and makes it the run's
// root by SQL, as a build that recorded a wrong size would have left it.
// It returns the hash of the directory tree holding the entry.
func (e *env) setEntry(runID, p string, entry vfs.Entry) cas.Hash {
	e.t.Helper()
	run, err := e.s.Runs.Run(e.ctx, runID)
	require.NoError(e.t, err)
	var root cas.Hash
	require.NoError(e.t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		root, err = e.s.Trees.Set(e.ctx, tx, run.Root, vfs.MustPath(p), &entry)
		return err
	}))
	e.exec(`UPDATE runs SET root = ? WHERE id = ?`, root, runID)
	dir, err := e.s.Trees.Lookup(e.ctx, nil, root, vfs.MustPath(p).Dir())
	require.NoError(e.t, err)
	return dir.Hash
}

// chunkOf returns the address of chunk idx of the chunked blob h.
func (e *env) chunkOf(h cas.Hash, idx int) cas.Hash {
	e.t.Helper()
	var chunk cas.Hash
	require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &chunk, `SELECT chunk FROM blob_chunks WHERE blob = ? AND idx = ?`, h, idx)
	}))
	return chunk
}

// TestFsckSizes: a size recorded for content that hashes to its address
// but is not the content's (a blob's or chunk's plain or stored size, a
// chunk list's offset, a tree entry's size) is reported as exactly one
// "size" problem naming the row and both sizes, and a sound store has none.
func TestFsckSizes(t *testing.T) {
	big := random(20, 600<<10) // chunked with InlineMax 64 KiB
	shared := random(1, 3000)  // scratch/shared.bin, stored raw
	onlyA := []byte("only run a\n")
	tests := []struct {
		name string
		// damage edits rows and returns the problems Fsck must report,
		// all of them and no other, Detail in full.
		damage func(e *env) []wsstore.Problem
	}{
		{name: "OK/Healthy", damage: func(e *env) []wsstore.Problem { return nil }},
		{name: "Blob/PlainSize", damage: func(e *env) []wsstore.Problem {
			h := cas.Sum(shared)
			e.exec(`UPDATE blobs SET size = 3001 WHERE hash = ?`, h)
			return []wsstore.Problem{{Kind: "size", Ref: h.String(), Detail: "blob records plain size 3001; its content has 3000 bytes"}}
		}},
		{name: "Blob/StoredSize", damage: func(e *env) []wsstore.Problem {
			h := cas.Sum(shared)
			e.exec(`UPDATE blobs SET stored = 17 WHERE hash = ?`, h)
			return []wsstore.Problem{{Kind: "size", Ref: h.String(), Detail: "blob records stored size 17; its row holds 3000 bytes"}}
		}},
		{name: "Chunked/PlainSize", damage: func(e *env) []wsstore.Problem {
			h := cas.Sum(big)
			e.exec(`UPDATE blobs SET size = 10 WHERE hash = ?`, h)
			return []wsstore.Problem{{Kind: "size", Ref: h.String(), Detail: fmt.Sprintf("blob records plain size 10; its content has %d bytes", len(big))}}
		}},
		{name: "Chunked/StoredSize", damage: func(e *env) []wsstore.Problem {
			h := cas.Sum(big)
			e.exec(`UPDATE blobs SET stored = 5 WHERE hash = ?`, h)
			return []wsstore.Problem{{Kind: "size", Ref: h.String(), Detail: "blob records stored size 5; its row holds 0 bytes"}}
		}},
		{name: "Chunked/Offset", damage: func(e *env) []wsstore.Problem {
			h := cas.Sum(big)
			var off int64
			require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
				return tx.GetContext(e.ctx, &off, `SELECT off FROM blob_chunks WHERE blob = ? AND idx = 1`, h)
			}))
			e.exec(`UPDATE blob_chunks SET off = off + 1 WHERE blob = ? AND idx = 1`, h)
			return []wsstore.Problem{{Kind: "size", Ref: h.String(), Detail: fmt.Sprintf("blob records chunk 1 at offset %d; the chunks before it hold %d bytes", off+1, off)}}
		}},
		{name: "Chunk/PlainSize", damage: func(e *env) []wsstore.Problem {
			c := e.chunkOf(cas.Sum(big), 0)
			var size int64
			require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
				return tx.GetContext(e.ctx, &size, `SELECT size FROM chunks WHERE hash = ?`, c)
			}))
			e.exec(`UPDATE chunks SET size = 1 WHERE hash = ?`, c)
			return []wsstore.Problem{{Kind: "size", Ref: c.String(), Detail: fmt.Sprintf("chunk records plain size 1; its content has %d bytes", size)}}
		}},
		{name: "Chunk/StoredSize", damage: func(e *env) []wsstore.Problem {
			c := e.chunkOf(cas.Sum(big), 0)
			var stored int64
			require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
				return tx.GetContext(e.ctx, &stored, `SELECT stored FROM chunks WHERE hash = ?`, c)
			}))
			e.exec(`UPDATE chunks SET stored = 2 WHERE hash = ?`, c)
			return []wsstore.Problem{{Kind: "size", Ref: c.String(), Detail: fmt.Sprintf("chunk records stored size 2; its row holds %d bytes", stored)}}
		}},
		{name: "TreeEntry/DisagreesWithOthers", damage: func(e *env) []wsstore.Problem {
			// The run's checkpoints name the blob with its size; the live
			// tree's entry says 99.
			h := cas.Sum(onlyA)
			dir := e.setEntry("run_a", "output/notes/a.md", vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: 99})
			return []wsstore.Problem{{Kind: "size", Ref: dir.String(), Detail: fmt.Sprintf(`entry "a.md" records 99 bytes; blob %s has 11`, h)}}
		}},
		{name: "TreeEntry/TheOnlyOne", damage: func(e *env) []wsstore.Problem {
			// The only entry naming a blob records a wrong size: the pass
			// over the blob rows finds it.
			var h cas.Hash
			require.NoError(e.t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
				var err error
				h, err = e.s.Blobs.PutBytes(e.ctx, tx, []byte("named once\n"))
				return err
			}))
			dir := e.setEntry("run_a", "output/once.md", vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: 4})
			return []wsstore.Problem{{Kind: "size", Ref: dir.String(), Detail: fmt.Sprintf(`entry "once.md" records 4 bytes; blob %s has 11`, h)}}
		}},
		{name: "TreeEntry/AgreesWithAWrongBlobRow", damage: func(e *env) []wsstore.Problem {
			// The blob's row and one entry both say 12: the content, 11
			// bytes that hash to the address, is what both are held to.
			h := cas.Sum(onlyA)
			e.exec(`UPDATE blobs SET size = 12 WHERE hash = ?`, h)
			dir := e.setEntry("run_a", "output/notes/a.md", vfs.Entry{Kind: vfs.KindFile, Hash: h, Size: 12})
			return []wsstore.Problem{
				{Kind: "size", Ref: h.String(), Detail: "blob records plain size 12; its content has 11 bytes"},
				{Kind: "size", Ref: dir.String(), Detail: fmt.Sprintf(`entry "a.md" records 12 bytes; blob %s has 11`, h)},
			}
		}},
		{name: "Blob/ContentDamagedSizeUnknown", damage: func(e *env) []wsstore.Problem {
			// Content that does not hash to its address tells no size:
			// the blob is reported, its entries are not.
			h := e.alterBlob(shared)
			e.exec(`UPDATE blobs SET size = 1 WHERE hash = ?`, h)
			return []wsstore.Problem{{Kind: "blob", Ref: h.String(), Detail: "get " + h.String() + ": store.corrupt: content does not hash to its address"}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCorruptibleEnv(t, wsstore.Options{CAS: cas.Options{InlineMax: 64 << 10}})
			twoRuns(e)
			e.write("run_a", "scratch/big.bin", big)
			want := tt.damage(e)

			rep, err := e.s.Fsck(e.ctx, nil)

			require.NoError(t, err)
			if want == nil {
				want = []wsstore.Problem{}
			}
			assert.Equal(t, want, rep.Problems)
		})
	}
}
