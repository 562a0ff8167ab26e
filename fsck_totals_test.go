package wsstore_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/cas/storagetest"
	"github.com/wsstore/wsstore/vfs"
)

// upload writes content as path of actor's space.
func (e *env) upload(actor, path string, content []byte) {
	e.t.Helper()
	_, err := e.s.Actors.Upload(e.ctx, actor, path, bytes.NewReader(content))
	require.NoError(e.t, err)
}

// spaceTotals is what alice's live tree holds in fillSpaces: 8 files
// (q1 and q2 twice, q3, a.txt, big.bin, output/notes/a.md), 8 directories
// (reports, 2025, 2026, copy, copy/2025, data, output, output/notes) and
// their bytes.
func spaceTotals(big []byte) vfs.Totals {
	return vfs.Totals{Files: 8, Dirs: 8, Bytes: 2*int64(len("q1\n")+len("q2 two\n")) + int64(len("q3 three\n")+len("top\n")+len(big)+len("only run a\n"))}
}

// fillSpaces gives the store of twoRuns actor spaces: alice's with nested
// directories, a directory twice (copy/2025 is reports/2025, one tree),
// a chunked file, a directory that is a run's too (output/notes is
// run_a's) and earlier versions sharing its subtrees; bob's empty once
// its one file is gone; carol's not counted yet (NULL totals).
func fillSpaces(e *env, big []byte) {
	e.t.Helper()
	for _, f := range []struct{ path, content string }{
		{"reports/2025/q1.md", "q1\n"},
		{"reports/2025/q2.md", "q2 two\n"},
		{"reports/2026/q3.md", "q3 three\n"},
		{"copy/2025/q1.md", "q1\n"},
		{"copy/2025/q2.md", "q2 two\n"},
		{"a.txt", "top\n"},
		{"output/notes/a.md", "only run a\n"},
	} {
		e.upload("alice", f.path, []byte(f.content))
	}
	e.upload("alice", "data/big.bin", big)
	e.upload("bob", "gone.md", []byte("soon gone\n"))
	_, err := e.s.Actors.Delete(e.ctx, "bob", "gone.md")
	require.NoError(e.t, err)
	e.upload("carol", "deep/er/c.md", []byte("carol\n"))
	e.exec(`UPDATE actor_spaces SET files = NULL, dirs = NULL, bytes = NULL WHERE actor = 'carol'`)

	copyDir, err := e.s.Actors.Stat(e.ctx, "alice", "copy/2025")
	require.NoError(e.t, err)
	reportsDir, err := e.s.Actors.Stat(e.ctx, "alice", "reports/2025")
	require.NoError(e.t, err)
	require.Equal(e.t, reportsDir.Hash, copyDir.Hash, "one tree twice in the space")
	notes := e.stat("run_a", "output/notes")
	spaceNotes, err := e.s.Actors.Stat(e.ctx, "alice", "output/notes")
	require.NoError(e.t, err)
	require.Equal(e.t, notes.Hash, spaceNotes.Hash, "a tree both the run and the space hold")
	info, err := e.s.Blobs.Stat(e.ctx, cas.Sum(big))
	require.NoError(e.t, err)
	require.Equal(e.t, cas.CodecChunked, info.Codec)
	require.Greater(e.t, e.count("blob_chunks"), 1, "big.bin is more than one chunk")
}

// TestFsckActorTotals: an actor space whose row keeps totals (files,
// directories, bytes) other than its live tree's is reported as exactly
// one "actor" problem naming both; a sound store with spaces of every
// shape has none, and a space whose tree is damaged is reported for the
// damage alone.
func TestFsckActorTotals(t *testing.T) {
	big := random(20, 600<<10) // chunked with InlineMax 64 KiB
	want := spaceTotals(big)
	text := func(t vfs.Totals) string {
		return fmt.Sprintf("%d files, %d directories and %d bytes", t.Files, t.Dirs, t.Bytes)
	}
	wrong := func(actor string, kept, holds vfs.Totals) []wsstore.Problem {
		return []wsstore.Problem{{Kind: "actor", Ref: actor,
			Detail: "its row counts " + text(kept) + ", its tree holds " + text(holds)}}
	}
	tests := []struct {
		name   string
		damage func(e *env) []wsstore.Problem
	}{
		{name: "OK/Healthy", damage: func(e *env) []wsstore.Problem { return nil }},
		{name: "OK/AfterChangesAndPrune", damage: func(e *env) []wsstore.Problem {
			// Totals moved by deletes and a prune stay the tree's.
			_, err := e.s.Actors.Delete(e.ctx, "alice", "reports/2026")
			require.NoError(e.t, err)
			_, err = e.s.Actors.DeleteByPrefix(e.ctx, "alice", "copy/2025/q")
			require.NoError(e.t, err)
			_, err = e.s.Actors.GC(e.ctx, actors.GCOptions{Actor: "alice", KeepVersions: 2})
			require.NoError(e.t, err)
			return nil
		}},
		{name: "Files", damage: func(e *env) []wsstore.Problem {
			e.exec(`UPDATE actor_spaces SET files = files + 2 WHERE actor = 'alice'`)
			kept := want
			kept.Files += 2
			return wrong("alice", kept, want)
		}},
		{name: "Dirs", damage: func(e *env) []wsstore.Problem {
			e.exec(`UPDATE actor_spaces SET dirs = 6 WHERE actor = 'alice'`)
			kept := want
			kept.Dirs = 6
			return wrong("alice", kept, want)
		}},
		{name: "Bytes", damage: func(e *env) []wsstore.Problem {
			e.exec(`UPDATE actor_spaces SET bytes = bytes - 1 WHERE actor = 'alice'`)
			kept := want
			kept.Bytes--
			return wrong("alice", kept, want)
		}},
		{name: "EmptySpace", damage: func(e *env) []wsstore.Problem {
			e.exec(`UPDATE actor_spaces SET files = 1, bytes = 10 WHERE actor = 'bob'`)
			return wrong("bob", vfs.Totals{Files: 1, Bytes: 10}, vfs.Totals{})
		}},
		{name: "TreeMissingBelowTheSpace", damage: func(e *env) []wsstore.Problem {
			// Below a missing tree the totals are not known: the tree is
			// reported, the row is not held to a count.
			dir, err := e.s.Actors.Stat(e.ctx, "alice", "reports/2026")
			require.NoError(e.t, err)
			e.exec(`DELETE FROM trees WHERE hash = ?`, dir.Hash)
			e.exec(`UPDATE actor_spaces SET files = 99 WHERE actor = 'alice'`)
			return []wsstore.Problem{{Kind: "reference", Ref: dir.Hash.String()}}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newCorruptibleEnv(t, wsstore.Options{CAS: cas.Options{InlineMax: 64 << 10}})
			twoRuns(e)
			fillSpaces(e, big)
			st, err := e.s.Actors.Stats(e.ctx, "alice")
			require.NoError(t, err)
			require.Equal(t, want, vfs.Totals{Files: st.Files, Dirs: st.Dirs, Bytes: st.Bytes}, "the row as the changes left it")
			expect := tt.damage(e)

			rep, err := e.s.Fsck(e.ctx, nil)

			require.NoError(t, err)
			if expect == nil {
				assert.Equal(t, []wsstore.Problem{}, rep.Problems)
				return
			}
			got := rep.Problems
			if expect[0].Detail == "" {
				// Which tree names the missing one first depends on the
				// order the walks take: the kind and ref are what count.
				got = nil
				for _, p := range rep.Problems {
					got = append(got, wsstore.Problem{Kind: p.Kind, Ref: p.Ref})
				}
			}
			assert.Equal(t, expect, got)
		})
	}
}

// TestFsckActorTotalsReadNoContent: fsck reads content (blobs and chunks,
// from the blob storage) only in its blobs phase, as the content store's
// Verify does; holding the spaces' totals to their trees reads none.
func TestFsckActorTotalsReadNoContent(t *testing.T) {
	storage, calls := storagetest.NewFaulty(cas.NewSQLiteStorage())
	e := newCorruptibleEnv(t, wsstore.Options{ReclaimIdle: -1, CAS: cas.Options{Storage: storage, InlineMax: 64 << 10}})
	twoRuns(e)
	big := random(20, 600<<10)
	fillSpaces(e, big)
	e.exec(`UPDATE actor_spaces SET files = files + 1 WHERE actor = 'alice'`)
	e.settle()

	reads := func(fn func()) map[storagetest.Method]int {
		// Get and Version read an object's bytes; Iterate lists rows.
		methods := []storagetest.Method{storagetest.Get, storagetest.Version}
		before := map[storagetest.Method]int{}
		for _, m := range methods {
			before[m] = calls.Calls(m)
		}
		fn()
		out := map[storagetest.Method]int{}
		for _, m := range methods {
			out[m] = calls.Calls(m) - before[m]
		}
		return out
	}
	verify := reads(func() {
		rep, err := e.s.Blobs.Verify(e.ctx, nil)
		require.NoError(t, err)
		require.Empty(t, rep.Problems)
	})
	var rep wsstore.FsckReport
	fsck := reads(func() {
		var err error
		rep, err = e.s.Fsck(e.ctx, nil)
		require.NoError(t, err)
	})

	require.Len(t, rep.Problems, 1)
	assert.Equal(t, "actor", rep.Problems[0].Kind)
	assert.Positive(t, verify[storagetest.Get])
	assert.Equal(t, verify, fsck, "content reads: fsck's are its blobs phase's")
	t.Logf("content reads: verify %v, fsck %v (%d blobs, %d chunks, %d trees)", verify, fsck, rep.Blobs, rep.Chunks, rep.Trees)
}
