package runs_test

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
	"github.com/wsstore/wsstore/wserr"
)

func noAuto() *runs.Profile {
	p := runs.DefaultProfile()
	off := false
	p.AutoCheckpoint = &off
	return &p
}

func TestCheckpointWritesOneRowAndOneEvent(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "hello")
	before := map[string]int{}
	for _, tb := range []string{"checkpoints", "events", "trees", "blobs", "chunks"} {
		before[tb] = e.count(tb)
	}
	cp, err := e.svc.Checkpoint(e.ctx, r.ID, "manual")
	require.NoError(t, err)
	assert.Equal(t, before["checkpoints"]+1, e.count("checkpoints"))
	assert.Equal(t, before["events"]+1, e.count("events"))
	for _, tb := range []string{"trees", "blobs", "chunks"} {
		assert.Equal(t, before[tb], e.count(tb), tb)
	}
	ev, err := e.st.Journal.Page(e.ctx, r.ID, journal.PageQuery{AfterSeq: cp.EventSeq - 1, Limit: 1})
	require.NoError(t, err)
	require.Len(t, ev, 1)
	assert.Equal(t, journal.CheckpointCreated, ev[0].Type)
	assert.Regexp(t, `^cp_\d{6}$`, cp.ID)
	assert.Equal(t, checkpoint.ID(cp.Seq), cp.ID)
}

// TestCheckpointReasonRefused: a reason too long, or not UTF-8 (which the
// row, its event and an export would each read apart), is refused and
// writes nothing.
func TestCheckpointReasonRefused(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: noAuto()})
	e.write(r.ID, "output/main.md", "hello")
	before := e.count("checkpoints") + e.count("events")
	for _, reason := range []string{strings.Repeat("x", 201), "bad\xff\xfe\x00reason", "\xc3"} {
		_, err := e.svc.Checkpoint(e.ctx, r.ID, reason)
		require.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "%q: %v", reason, err)
	}
	assert.Equal(t, before, e.count("checkpoints")+e.count("events"))
	_, err := e.svc.Checkpoint(e.ctx, r.ID, "ok\x00ok é")
	require.NoError(t, err)
}

func TestAutomaticCheckpointReasons(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	ws := e.svc.Workspace(r.ID, runs.ModelScope)
	fi := e.write(r.ID, "output/main.md", "a b c")
	assert.Equal(t, "cp_000002", fi.Checkpoint, "a change names the checkpoint it took")
	fi, err := ws.Patch(e.ctx, vfs.MustPath("output/main.md"), "b", "B", vfs.PatchOptions{})
	require.NoError(t, err)
	assert.Equal(t, "cp_000003", fi.Checkpoint)
	fi, err = ws.Delete(e.ctx, vfs.MustPath("output/main.md"))
	require.NoError(t, err)
	assert.Equal(t, "cp_000004", fi.Checkpoint)
	cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	var reasons []string
	for _, c := range cps {
		reasons = append(reasons, c.Reason)
	}
	assert.Equal(t, []string{"after_init", "after_workspace_write", "after_workspace_patch", "after_workspace_delete"}, reasons)
	for i, c := range cps[1:] {
		assert.Equal(t, cps[i].ID, c.Parent, "each checkpoint descends from the previous one")
	}

	t.Run("OffByProfile", func(t *testing.T) {
		r := e.create("c2", runs.CreateRequest{Profile: noAuto()})
		e.write(r.ID, "output/main.md", "x")
		cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
		require.NoError(t, err)
		assert.Empty(t, cps)
	})
}

// bigRun creates a run whose live root holds n files below output/, built
// bottom-up in one transaction (test setup: the write path is proven
// elsewhere), and checkpoints it.
func bigRun(t *testing.T, e *lifecycleEnv, chat string, n int) (runs.Run, checkpoint.Checkpoint) {
	t.Helper()
	r := e.create(chat, runs.CreateRequest{Profile: noAuto()})
	trees := e.st.Trees
	require.NoError(t, e.st.DB.Update(e.ctx, func(tx *index.Tx) error {
		root := r.Root
		var dirs []vfs.Entry
		for d := 0; d*100 < n; d++ {
			var files []vfs.Entry
			for f := d * 100; f < min(n, (d+1)*100); f++ {
				content := []byte(fmt.Sprintf("file %d\n", f))
				h, err := e.st.Blobs.PutBytes(e.ctx, tx, content)
				if err != nil {
					return err
				}
				files = append(files, vfs.Entry{Name: fmt.Sprintf("f%05d.txt", f), Kind: vfs.KindFile, Hash: h, Size: int64(len(content))})
			}
			h, err := trees.Put(e.ctx, tx, files)
			if err != nil {
				return err
			}
			var size int64
			for _, f := range files {
				size += f.Size
			}
			dirs = append(dirs, vfs.Entry{Name: fmt.Sprintf("d%03d", d), Kind: vfs.KindDir, Hash: h, Size: size})
		}
		out, err := trees.Put(e.ctx, tx, dirs)
		if err != nil {
			return err
		}
		var size int64
		for _, d := range dirs {
			size += d.Size
		}
		root, err = trees.Set(e.ctx, tx, root, vfs.MustPath("output"), &vfs.Entry{Kind: vfs.KindDir, Hash: out, Size: size})
		if err != nil {
			return err
		}
		_, err = tx.ExecContext(e.ctx, `UPDATE runs SET root = ? WHERE id = ?`, root, r.ID)
		return err
	}))
	cp, err := e.svc.Checkpoint(e.ctx, r.ID, "big")
	require.NoError(t, err)
	return r, cp
}

// rowCounts counts the rows of every table a rollback could write.
func rowCounts(e *lifecycleEnv) map[string]int {
	out := map[string]int{}
	for _, tb := range []string{"trees", "blobs", "chunks", "blob_chunks", "checkpoints", "events", "runs", "chats", "commits"} {
		out[tb] = e.count(tb)
	}
	return out
}

func TestRollbackIsOneSwapWhateverTheSize(t *testing.T) {
	e := newLifecycleEnv(t)
	growth := map[int]map[string]int{}
	for _, n := range []int{10, 10000} {
		r, cp := bigRun(t, e, fmt.Sprintf("chat%d", n), n)
		e.write(r.ID, "output/d000/f00000.txt", "changed")
		e.write(r.ID, "scratch/new.md", "new")
		before := rowCounts(e)
		_, err := e.svc.Rollback(e.ctx, r.ID, cp.Seq, runs.RollbackOptions{})
		require.NoError(t, err)
		after := rowCounts(e)
		diff := map[string]int{}
		for k := range after {
			diff[k] = after[k] - before[k]
		}
		growth[n] = diff
		ws := e.svc.Workspace(r.ID, runs.HostScope)
		assert.Equal(t, "file 0\n", e.read(ws, "output/d000/f00000.txt"))
		_, err = ws.Stat(e.ctx, vfs.MustPath("scratch/new.md"))
		assert.True(t, wserr.Is(err, wserr.FileNotFound))
	}
	assert.Equal(t, map[string]int{"trees": 0, "blobs": 0, "chunks": 0, "blob_chunks": 0, "checkpoints": 0, "events": 1, "runs": 0, "chats": 0, "commits": 0}, growth[10000])
	assert.Equal(t, growth[10], growth[10000], "rollback writes the same rows at 10 and 10,000 files")
}

// TestRollbackLeavesOnlyTheRootItReplaced: a rollback records the root it
// replaces as a candidate for the next collection, and a rollback to the
// workspace as it is (the checkpoint it was just rolled back to) records
// nothing, since no tree is left behind.
func TestRollbackLeavesOnlyTheRootItReplaced(t *testing.T) {
	e := newLifecycleEnv(t)
	r, cp1 := checkpointedV1ThenV2(t, e)
	candidates := func() int { return e.count("gc_candidates") }
	before := candidates()
	_, err := e.svc.Rollback(e.ctx, r.ID, cp1.Seq, runs.RollbackOptions{})
	require.NoError(t, err)
	assert.Equal(t, before+1, candidates(), "the v2 workspace's root is a candidate")
	_, err = e.svc.Rollback(e.ctx, r.ID, cp1.Seq, runs.RollbackOptions{})
	require.NoError(t, err)
	assert.Equal(t, before+1, candidates(), "a rollback to where the workspace is leaves no tree behind")
	assert.Equal(t, "v1", e.read(e.svc.Workspace(r.ID, runs.ModelScope), "output/main.md"))
}

// checkpointedV1ThenV2 creates a run whose output/main.md is "v1" at its
// checkpoint cp1 and "v2" in the live workspace.
func checkpointedV1ThenV2(t *testing.T, e *lifecycleEnv) (runs.Run, checkpoint.Checkpoint) {
	t.Helper()
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/main.md", "v1")
	cp1, err := e.svc.Checkpoint(e.ctx, r.ID, "v1")
	require.NoError(t, err)
	e.write(r.ID, "output/main.md", "v2")
	return r, cp1
}

func TestReadAtCheckpointAfterRollbackAndWrites(t *testing.T) {
	e := newLifecycleEnv(t)
	r, cp1 := checkpointedV1ThenV2(t, e)
	cp2, err := e.svc.Checkpoint(e.ctx, r.ID, "v2")
	require.NoError(t, err)

	_, err = e.svc.Rollback(e.ctx, r.ID, cp1.Seq, runs.RollbackOptions{})
	require.NoError(t, err)
	e.write(r.ID, "output/main.md", "v3")

	assert.Equal(t, "v1", e.read(e.svc.WorkspaceAt(r.ID, cp1.Seq, runs.ModelScope), "output/main.md"))
	assert.Equal(t, "v2", e.read(e.svc.WorkspaceAt(r.ID, cp2.Seq, runs.ModelScope), "output/main.md"), "later checkpoints stay readable")
	assert.Equal(t, "v3", e.read(e.svc.Workspace(r.ID, runs.ModelScope), "output/main.md"))

	cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	last := cps[len(cps)-1]
	assert.Equal(t, cp1.ID, last.Parent, "the checkpoint after a rollback descends from the rollback target: history forks")

	_, err = e.svc.WorkspaceAt(r.ID, cp1.Seq, runs.ModelScope).Write(e.ctx, vfs.MustPath("output/main.md"), []byte("x"), vfs.WriteOptions{})
	assert.True(t, wserr.Is(err, wserr.PathNotWritable), "a checkpoint view is read-only: %v", err)
}

func TestRollbackStatus(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	first := cps[0].Seq

	got, err := e.svc.Rollback(e.ctx, r.ID, first, runs.RollbackOptions{})
	require.NoError(t, err)
	assert.Equal(t, runs.Running, got.Status)

	got, err = e.svc.Rollback(e.ctx, r.ID, first, runs.RollbackOptions{Pause: true})
	require.NoError(t, err)
	assert.Equal(t, runs.Paused, got.Status)

	_, err = e.svc.Rollback(e.ctx, r.ID, 99, runs.RollbackOptions{})
	assert.True(t, wserr.Is(err, wserr.CheckpointNotFound))

	require.NoError(t, e.svc.SetStatus(e.ctx, r.ID, runs.Cancelled, "user"))
	before := rowCounts(e)
	_, err = e.svc.Rollback(e.ctx, r.ID, first, runs.RollbackOptions{})
	assert.True(t, wserr.Is(err, wserr.InvalidState))
	assert.Equal(t, before, rowCounts(e), "a refused rollback changes nothing")
}

func TestCheckpointView(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Inputs: map[string][]byte{"prompt_snapshot.json": []byte(`{}`)}})
	fi := e.write(r.ID, "output/main.md", "hello")
	cps, err := e.st.Checkpoints.List(e.ctx, r.ID)
	require.NoError(t, err)
	last := cps[len(cps)-1]
	v, err := e.st.Checkpoints.View(e.ctx, r.ID, last.Seq)
	require.NoError(t, err)
	assert.Equal(t, last.ID, v.ID)
	assert.Equal(t, r.ID, v.RunID)
	assert.Equal(t, "after_workspace_write", v.Reason)
	assert.Equal(t, last.EventSeq, v.EventSeq)
	var paths []string
	for _, f := range v.Files {
		paths = append(paths, f.Path)
		if f.Path == "output/main.md" {
			assert.Equal(t, fi.Hash, f.Hash)
			assert.Equal(t, int64(5), f.Bytes)
			assert.Equal(t, cas.Sum([]byte("hello")), f.Hash)
		}
	}
	assert.Equal(t, []string{"input/persist_snapshot.json", "input/prompt_snapshot.json", "output/main.md"}, paths)

	_, err = e.st.Checkpoints.View(e.ctx, r.ID, 999)
	assert.True(t, wserr.Is(err, wserr.CheckpointNotFound))
}

func TestDiff(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: noAuto()})
	e.write(r.ID, "output/main.md", "one\ntwo\nthree\n")
	e.write(r.ID, "output/gone.md", "bye\n")
	e.write(r.ID, "output/bin.dat", "\x00\x01")
	e.write(r.ID, "output/big.md", strings.Repeat("a line of a large file\n", 50000))
	from, err := e.svc.Checkpoint(e.ctx, r.ID, "from")
	require.NoError(t, err)
	_, err = e.svc.Workspace(r.ID, runs.ModelScope).Patch(e.ctx, vfs.MustPath("output/main.md"), "two", "2", vfs.PatchOptions{})
	require.NoError(t, err)
	require.NoError(t, e.svc.Workspace(r.ID, runs.ModelScope).Remove(e.ctx, vfs.MustPath("output/gone.md")))
	e.write(r.ID, "plan/plan.md", "step\n")
	e.write(r.ID, "output/bin.dat", "\x00\x02")
	e.write(r.ID, "output/big.md", strings.Repeat("a line of a large file\n", 50001))

	check := func(t *testing.T, diffs []checkpoint.FileDiff) {
		ops := map[string]vfs.ChangeOp{}
		for _, d := range diffs {
			ops[d.Path] = d.Op
		}
		assert.Equal(t, map[string]vfs.ChangeOp{"output/main.md": vfs.Modified, "output/gone.md": vfs.Deleted, "plan/plan.md": vfs.Added,
			"output/bin.dat": vfs.Modified, "output/big.md": vfs.Modified}, ops)
		for _, d := range diffs {
			switch d.Path {
			case "output/main.md":
				assert.Equal(t, "--- a/output/main.md\n+++ b/output/main.md\n@@ -1,3 +1,3 @@\n one\n-two\n+2\n three\n", d.Unified)
			case "output/bin.dat":
				assert.True(t, d.Binary)
				assert.False(t, d.TooLarge)
				assert.Empty(t, d.Unified)
			case "output/big.md":
				assert.True(t, d.TooLarge, "a side past 1 MiB")
				assert.False(t, d.Binary || d.Truncated)
				assert.Empty(t, d.Unified)
			case "plan/plan.md":
				assert.Equal(t, "--- /dev/null\n+++ b/plan/plan.md\n@@ -0,0 +1 @@\n+step\n", d.Unified)
			}
		}
	}
	t.Run("CheckpointToLive", func(t *testing.T) {
		diffs, err := e.svc.Diff(e.ctx, r.ID, from.Seq, 0, runs.DiffOptions{})
		require.NoError(t, err)
		check(t, diffs)
	})
	t.Run("CheckpointToCheckpoint", func(t *testing.T) {
		to, err := e.svc.Checkpoint(e.ctx, r.ID, "to")
		require.NoError(t, err)
		diffs, err := e.svc.Diff(e.ctx, r.ID, from.Seq, to.Seq, runs.DiffOptions{})
		require.NoError(t, err)
		check(t, diffs)
		back, err := e.svc.Diff(e.ctx, r.ID, to.Seq, to.Seq, runs.DiffOptions{})
		require.NoError(t, err)
		assert.Empty(t, back)
	})
	t.Run("LiveToCheckpoint", func(t *testing.T) {
		// The other way: what the live workspace would lose going back.
		diffs, err := e.svc.Diff(e.ctx, r.ID, runs.Live, from.Seq, runs.DiffOptions{})
		require.NoError(t, err)
		ops := map[string]vfs.ChangeOp{}
		for _, d := range diffs {
			ops[d.Path] = d.Op
		}
		assert.Equal(t, vfs.Deleted, ops["plan/plan.md"])
		assert.Equal(t, vfs.Added, ops["output/gone.md"])
		same, err := e.svc.Diff(e.ctx, r.ID, runs.Live, runs.Live, runs.DiffOptions{})
		require.NoError(t, err)
		assert.Empty(t, same)
	})
	t.Run("ErrCheckpointNotFound", func(t *testing.T) {
		_, err := e.svc.Diff(e.ctx, r.ID, 404, 0, runs.DiffOptions{})
		assert.True(t, wserr.Is(err, wserr.CheckpointNotFound))
		_, err = e.svc.Diff(e.ctx, r.ID, runs.Live, 404, runs.DiffOptions{})
		assert.True(t, wserr.Is(err, wserr.CheckpointNotFound))
	})
}

// TestDiffHeadersOfANameWithASpace: as git does, a header naming a path
// with a space ends in a tab, so that patch(1) reads the whole name rather
// than stopping at the space; /dev/null never takes one.
func TestDiffHeadersOfANameWithASpace(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: noAuto()})
	e.write(r.ID, "output/my notes.md", "one\n")
	e.write(r.ID, "output/old draft.md", "old\n")
	from, err := e.svc.Checkpoint(e.ctx, r.ID, "from")
	require.NoError(t, err)
	e.write(r.ID, "output/my notes.md", "two\n")
	require.NoError(t, e.svc.Workspace(r.ID, runs.ModelScope).Remove(e.ctx, vfs.MustPath("output/old draft.md")))
	e.write(r.ID, "output/new file.md", "new\n")

	diffs, err := e.svc.Diff(e.ctx, r.ID, from.Seq, runs.Live, runs.DiffOptions{})
	require.NoError(t, err)
	got := map[string]string{}
	for _, d := range diffs {
		got[d.Path] = d.Unified
	}
	assert.Equal(t, map[string]string{
		"output/my notes.md":  "--- a/output/my notes.md\t\n+++ b/output/my notes.md\t\n@@ -1 +1 @@\n-one\n+two\n",
		"output/new file.md":  "--- /dev/null\n+++ b/output/new file.md\t\n@@ -0,0 +1 @@\n+new\n",
		"output/old draft.md": "--- a/output/old draft.md\t\n+++ /dev/null\n@@ -1 +0,0 @@\n-old\n",
	}, got)
}

func TestDiffResponseLimit(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{Profile: noAuto()})
	var a, b strings.Builder
	for i := range 200 {
		fmt.Fprintf(&a, "line %d\n", i)
		if i%10 == 0 {
			fmt.Fprintf(&b, "changed %d\n", i)
		} else {
			fmt.Fprintf(&b, "line %d\n", i)
		}
	}
	e.write(r.ID, "output/big.md", a.String())
	e.write(r.ID, "plan/small.md", "x\n")
	from, err := e.svc.Checkpoint(e.ctx, r.ID, "from")
	require.NoError(t, err)
	e.write(r.ID, "output/big.md", b.String())
	e.write(r.ID, "plan/small.md", "y\n")

	full, err := e.svc.Diff(e.ctx, r.ID, from.Seq, 0, runs.DiffOptions{})
	require.NoError(t, err)
	require.Len(t, full, 2)
	assert.False(t, full[0].Truncated)
	hunks := strings.Count(full[0].Unified, "\n@@ ")
	require.Equal(t, 20, hunks)

	t.Run("CutsAtAHunk", func(t *testing.T) {
		diffs, err := e.svc.Diff(e.ctx, r.ID, from.Seq, 0, runs.DiffOptions{MaxBytes: len(full[0].Unified) / 2})
		require.NoError(t, err)
		require.Len(t, diffs, 2)
		big, small := diffs[0], diffs[1]
		assert.True(t, big.Truncated)
		assert.LessOrEqual(t, len(big.Unified), len(full[0].Unified)/2)
		assert.True(t, strings.HasPrefix(full[0].Unified, big.Unified), "the kept hunks are the first ones, whole")
		assert.Equal(t, hunks, strings.Count(big.Unified, "\n@@ ")+big.OmittedHunks)
		assert.True(t, small.Truncated, "the limit was reached before this file")
		assert.Empty(t, small.Unified)
		assert.Zero(t, small.OmittedHunks)
	})
	t.Run("NeverPastTheLimit", func(t *testing.T) {
		// Limits below a file's headers, its first hunk, and in between:
		// the response's text stays within each, and a file with no hunk
		// kept has no text, headers included.
		for _, limit := range []int{1, 20, 40, 80, 200, 1000} {
			diffs, err := e.svc.Diff(e.ctx, r.ID, from.Seq, 0, runs.DiffOptions{MaxBytes: limit})
			require.NoError(t, err)
			total := 0
			for _, d := range diffs {
				total += len(d.Unified)
				assert.True(t, d.Unified == "" || strings.Contains(d.Unified, "\n@@ "), "limit %d: %s has hunks or no text: %q", limit, d.Path, d.Unified)
				assert.True(t, d.Truncated || d.Unified != "", "limit %d: %s", limit, d.Path)
			}
			assert.LessOrEqual(t, total, limit)
		}
	})
	t.Run("ErrNegative", func(t *testing.T) {
		_, err := e.svc.Diff(e.ctx, r.ID, from.Seq, 0, runs.DiffOptions{MaxBytes: -1})
		assert.True(t, wserr.Is(err, wserr.InvalidArgument))
	})
}

func TestWriteFromStreamsLargeFiles(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	ws := e.svc.Workspace(r.ID, runs.ModelScope)
	big := bytes.Repeat([]byte("0123456789abcdef"), 600_000) // 9.6 MB: chunked
	fi, err := ws.WriteFrom(e.ctx, vfs.MustPath("output/big.bin"), bytes.NewReader(big), vfs.WriteOptions{})
	require.NoError(t, err)
	assert.Equal(t, int64(len(big)), fi.Size)
	assert.Equal(t, cas.Sum(big), fi.Hash)
	assert.NotEmpty(t, fi.Checkpoint)
	res, err := ws.Read(e.ctx, vfs.MustPath("output/big.bin"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.True(t, bytes.Equal(big, res.Content))

	t.Run("ErrNotWritableStoresNothing", func(t *testing.T) {
		before := rowCounts(e)
		_, err := e.svc.Workspace(r.ID, runs.HostScope).WriteFrom(e.ctx, vfs.MustPath("input/x.bin"), bytes.NewReader([]byte("new content")), vfs.WriteOptions{})
		assert.True(t, wserr.Is(err, wserr.PathNotWritable))
		assert.Equal(t, before, rowCounts(e))
	})
	t.Run("ErrAppend", func(t *testing.T) {
		_, err := ws.WriteFrom(e.ctx, vfs.MustPath("output/big.bin"), bytes.NewReader(nil), vfs.WriteOptions{Mode: vfs.Append})
		assert.True(t, wserr.Is(err, wserr.InvalidArgument))
	})
	// The path is checked before anything is read: a stream aimed at a
	// directory, below a file or over a version the caller has not seen
	// is refused unread, and stores nothing.
	e.write(r.ID, "output/dir/a.md", "a")
	for name, c := range map[string]struct {
		path string
		opt  vfs.WriteOptions
		code wserr.Code
	}{
		"ErrPathIsDirectoryReadsNothing": {"output/dir", vfs.WriteOptions{}, wserr.PathIsDirectory},
		"ErrBelowAFileReadsNothing":      {"output/big.bin/x/y.bin", vfs.WriteOptions{}, wserr.NotADirectory},
		"ErrStaleReadsNothing":           {"output/big.bin", vfs.WriteOptions{ExpectedHash: cas.Sum([]byte("other"))}, wserr.WriteStaleFile},
		"ErrStaleNewFileReadsNothing":    {"output/new.bin", vfs.WriteOptions{ExpectedHash: cas.Sum([]byte("other"))}, wserr.WriteStaleFile},
		// No file is where a hash is expected: stale, as Write says.
		"ErrStaleBelowAFileReadsNothing": {"output/big.bin/x/y.bin", vfs.WriteOptions{ExpectedHash: cas.Sum([]byte("other"))}, wserr.WriteStaleFile},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := ws.Write(e.ctx, vfs.MustPath(c.path), []byte("small"), c.opt)
			require.Equal(t, c.code, wserr.CodeOf(err), "Write: %v", err)
			before := rowCounts(e)
			src := &countingReader{r: bytes.NewReader(big)}
			_, err = ws.WriteFrom(e.ctx, vfs.MustPath(c.path), src, c.opt)
			assert.Equal(t, c.code, wserr.CodeOf(err), "%v", err)
			assert.Zero(t, src.n, "bytes read")
			assert.Equal(t, before, rowCounts(e))
		})
	}
}

// TestWorkspaceAtBelowOneIsNoView: checkpoints count from 1, so
// WorkspaceAt(run, 0) (runs.Live) and a negative seq are no view of
// anything: reads fail with workspace.invalid_argument, writes with
// workspace.path_not_writable, and the live workspace is not touched.
func TestWorkspaceAtBelowOneIsNoView(t *testing.T) {
	e := newLifecycleEnv(t)
	r := e.create("c1", runs.CreateRequest{})
	e.write(r.ID, "output/a.md", "live")
	for _, seq := range []int64{runs.Live, -1} {
		ws := e.svc.WorkspaceAt(r.ID, seq, runs.ModelScope)
		_, err := ws.Read(e.ctx, vfs.MustPath("output/a.md"), vfs.ReadOptions{})
		assert.Equal(t, wserr.InvalidArgument, wserr.CodeOf(err), "seq %d: %v", seq, err)
		_, err = ws.Write(e.ctx, vfs.MustPath("output/a.md"), []byte("changed"), vfs.WriteOptions{})
		assert.Equal(t, wserr.PathNotWritable, wserr.CodeOf(err), "seq %d: %v", seq, err)
		_, err = ws.Delete(e.ctx, vfs.MustPath("output/a.md"))
		assert.Equal(t, wserr.PathNotWritable, wserr.CodeOf(err), "seq %d: %v", seq, err)
	}
	assert.Equal(t, "live", e.read(e.svc.Workspace(r.ID, runs.HostScope), "output/a.md"))
}
