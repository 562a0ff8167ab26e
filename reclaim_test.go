package wsstore_test

import (
	"context"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// tracer records the statements transactions run while it is on.
type tracer struct {
	mu    sync.Mutex
	on    bool
	stmts []string
	// stop, if set, is called with the count of statements so far; it
	// may cancel the context of the call being traced.
	stop func(n int)
}

func (tr *tracer) trace(q string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if !tr.on || strings.Contains(q, "blob_reencodes") {
		// The background re-encoder looks for work on its own clock; the
		// stores traced re-encode inline, so it never finds any.
		return
	}
	tr.stmts = append(tr.stmts, q)
	if tr.stop != nil {
		tr.stop(len(tr.stmts))
	}
}

func (tr *tracer) start() {
	tr.mu.Lock()
	tr.on, tr.stmts = true, nil
	tr.mu.Unlock()
}

func (tr *tracer) end() []string {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.on = false
	return tr.stmts
}

func openTraced(t *testing.T, opts wsstore.Options) (*retEnv, *tracer) {
	tr := &tracer{}
	opts.Index.Trace = tr.trace
	opts.CAS.InlineDeltas = true
	return newRetEnv(t, opts), tr
}

func (e *retEnv) totalChanges() int64 {
	var n int64
	require.NoError(e.t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		return tx.GetContext(e.ctx, &n, `SELECT total_changes()`)
	}))
	return n
}

func (e *retEnv) rows(table string) int { return storetest.CountRows(e.t, e.s.DB, table) }

// reclaimCost is what one Reclaim did and cost.
type reclaimCost struct {
	Statements int
	Checked    int
	Freed      wsstore.ObjectCounts
	FreedBytes int64
}

// TestReclaimCostIsWhatTheDeletionLeft: the reclaim after deleting one run
// runs the same statements, checks the same candidates and frees the same
// rows whether the store holds 10 or 300 other runs, and every statement
// it runs reads through an index: its cost is the deleted run's objects,
// not the store. What the run shared with the others stays.
func TestReclaimCostIsWhatTheDeletionLeft(t *testing.T) {
	costs := map[int]reclaimCost{}
	var plans []string
	for _, others := range []int{10, 300} {
		e, tr := openTraced(t, wsstore.Options{})
		for i := range others {
			id := fmt.Sprintf("run_o%03d", i)
			e.run(fmt.Sprintf("chat-%02d", i%20), id, nil)
			require.NoError(t, e.write(id, "output/shared.md", "the same in every run\n"))
			require.NoError(t, e.write(id, "output/own.md", fmt.Sprintf("run %d's own answer\n", i)))
			e.finish(id)
		}
		e.run("chat-x", "run_x", nil)
		require.NoError(t, e.write("run_x", "output/shared.md", "the same in every run\n"))
		for i := range 5 {
			require.NoError(t, e.write("run_x", "output/main.md", strings.Repeat(fmt.Sprintf("draft %d of the answer\n", i), 40*(i+1))))
		}
		require.NoError(t, e.write("run_x", "plan/plan.md", "a plan only run_x has\n"))
		e.finish("run_x")
		_, err := e.s.Reclaim(e.ctx) // what the runs' ends left
		require.NoError(t, err)
		blobs := e.rows("blobs")

		require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_x"))
		tr.start()
		rep, err := e.s.Reclaim(e.ctx)
		stmts := tr.end()
		require.NoError(t, err)
		assert.False(t, rep.Marked)
		costs[others] = reclaimCost{Statements: len(stmts), Checked: rep.Checked, Freed: rep.GC.Freed, FreedBytes: rep.GC.FreedBytes}
		for i := range 5 {
			assert.False(t, e.has(cas.Sum([]byte(strings.Repeat(fmt.Sprintf("draft %d of the answer\n", i), 40*(i+1))))), "draft %d goes", i)
		}
		assert.False(t, e.has(cas.Sum([]byte("a plan only run_x has\n"))))
		assert.True(t, e.has(cas.Sum([]byte("the same in every run\n"))))
		assert.Equal(t, blobs-rep.GC.Freed.Blobs, e.rows("blobs"))
		assert.Zero(t, e.rows("gc_candidates"), "nothing is left to check")
		if others == 10 {
			plans = queryPlans(t, e, stmts)
		}
		for i := range others {
			got, err := e.s.Runs.Workspace(fmt.Sprintf("run_o%03d", i), runs.HostScope).Read(e.ctx, vfs.MustPath("output/shared.md"), vfs.ReadOptions{})
			require.NoError(t, err)
			assert.Equal(t, "the same in every run\n", string(got.Content))
		}
		storetest.RequireSound(t, e.s)
		gc, err := e.s.GC(e.ctx, wsstore.GCOptions{DryRun: true, Grace: -1})
		require.NoError(t, err)
		assert.Zero(t, gc.Freed.Blobs, "a full gc finds no file content left behind")
	}
	assert.Equal(t, costs[10], costs[300])
	t.Logf("reclaim after deleting one run: %+v", costs[10])
	for _, p := range plans {
		assert.NotRegexp(t, regexp.MustCompile(`\bSCAN (blobs|chunks|blob_chunks|trees|tree_refs|runs|chats|checkpoints|actor_spaces|actor_changes|gc_candidates)\b`), p)
	}
}

// queryPlans returns EXPLAIN QUERY PLAN of each distinct data statement
// in stmts, with every parameter bound to a hash-sized value.
func queryPlans(t *testing.T, e *retEnv, stmts []string) []string {
	seen := map[string]bool{}
	var out []string
	param := regexp.MustCompile(`\?(\d*)`)
	for _, q := range stmts {
		head := strings.ToUpper(strings.Fields(q)[0])
		if seen[q] || (head != "SELECT" && head != "INSERT" && head != "UPDATE" && head != "DELETE") {
			continue
		}
		seen[q] = true
		n := 0
		for _, m := range param.FindAllStringSubmatch(q, -1) {
			if m[1] == "" {
				n++
			} else {
				var k int
				fmt.Sscan(m[1], &k)
				n = max(n, k)
			}
		}
		args := make([]any, n)
		for i := range args {
			args[i] = make([]byte, 32)
		}
		lines := storetest.QueryPlan(t, e.s.DB, q, args...)
		out = append(out, q+"\n  "+strings.Join(lines, "\n  "))
	}
	require.NotEmpty(t, out)
	return out
}

// TestReclaimInterruptedAnywhere: a reclaim cut off after any number of
// statements (a crash, a cancelled context) leaves a sound store, and the
// next reclaim frees exactly what an uninterrupted one does.
func TestReclaimInterruptedAnywhere(t *testing.T) {
	setup := func(e *retEnv) {
		for i := range 3 {
			id := fmt.Sprintf("run_%d", i)
			e.run("chat-a", id, nil)
			require.NoError(t, e.write(id, "output/common.md", "common\n"))
			for j := range 3 {
				require.NoError(t, e.write(id, fmt.Sprintf("output/f%d.md", j), fmt.Sprintf("run %d file %d\n", i, j)))
			}
			e.finish(id)
		}
		_, err := e.s.Reclaim(e.ctx)
		require.NoError(t, err)
		require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_0"))
		require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_1"))
	}
	ref, _ := openTraced(t, wsstore.Options{})
	setup(ref)
	want, err := ref.s.Reclaim(ref.ctx)
	require.NoError(t, err)
	require.Positive(t, want.GC.Freed.Blobs)
	wantRows := [3]int{ref.rows("blobs"), ref.rows("trees"), ref.rows("tree_refs")}

	for cut := 1; ; cut += 5 + cut/2 {
		e, tr := openTraced(t, wsstore.Options{})
		setup(e)
		ctx, cancel := context.WithCancel(e.ctx)
		tr.stop = func(n int) {
			if n >= cut {
				cancel()
			}
		}
		tr.start()
		_, err := e.s.Reclaim(ctx)
		n := len(tr.end())
		cancel()
		storetest.RequireSound(t, e.s)
		_, err2 := e.s.Reclaim(e.ctx)
		require.NoError(t, err2)
		assert.Equal(t, wantRows, [3]int{e.rows("blobs"), e.rows("trees"), e.rows("tree_refs")}, "cut after %d statements", cut)
		assert.Zero(t, e.rows("gc_candidates"))
		storetest.RequireSound(t, e.s)
		if err == nil && n < cut {
			break // the reclaim ran to its end before the cut
		}
	}
}

// TestReclaimKeepsABaseMadeSinceTheDeletion: content X, stored by a run
// since deleted, becomes the newest version of a file in another run, so
// that run's checkpointed version P is stored as a delta against X; then
// that run moves on (a rollback to P). X is a candidate, and no tree names
// it any more, but P rests on it: the reclaim must keep it.
func TestReclaimKeepsABaseMadeSinceTheDeletion(t *testing.T) {
	P, X := string(keeperLog("version P\n")), string(keeperLog("version X\n"))
	e := newRetEnv(t, wsstore.Options{})
	createManual(t, e.s, "chat-1", "run_a")
	require.NoError(t, e.write("run_a", "output/f.md", P))
	cp, err := e.s.Runs.Checkpoint(e.ctx, "run_a", "keep P")
	require.NoError(t, err)
	e.run("chat-2", "run_b", nil)
	require.NoError(t, e.write("run_b", "output/g.md", X))
	_, err = e.s.Runs.CancelAndDeleteRun(e.ctx, "run_b")
	require.NoError(t, err)

	require.NoError(t, e.write("run_a", "output/f.md", X))
	_, err = e.s.Blobs.Reencode(e.ctx, 0) // the write queued P's delta
	require.NoError(t, err)
	info, err := e.s.Blobs.Stat(e.ctx, cas.Sum([]byte(P)))
	require.NoError(t, err)
	require.Equal(t, cas.Sum([]byte(X)), info.Base, "P now rests on X")
	_, err = e.s.Runs.Rollback(e.ctx, "run_a", cp.Seq, runs.RollbackOptions{})
	require.NoError(t, err)

	rep, err := e.s.Reclaim(e.ctx)
	require.NoError(t, err)
	assert.Positive(t, rep.Checked)
	got, err := e.s.Blobs.ReadAll(e.ctx, cas.Sum([]byte(P)))
	require.NoError(t, err, "P is reachable from run_a")
	assert.Equal(t, P, string(got))
	storetest.RequireSound(t, e.s)
}

// TestReclaimBesideAWriter: a writer that commits between the reclaim's
// steps, re-using content the deleted run held, keeps it.
func TestReclaimBesideAWriter(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	e.run("chat-1", "run_old", nil)
	for i := range 40 {
		require.NoError(t, e.write("run_old", fmt.Sprintf("output/f%02d.md", i), fmt.Sprintf("file %d\n", i)))
	}
	e.finish("run_old")
	e.run("chat-2", "run_new", nil)
	require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_old"))
	wrote := 0
	_, err := e.s.CollectCandidates(e.ctx, wsstore.StepOptions{Objects: 8, GCOptions: wsstore.GCOptions{Grace: -1,
		Progress: func(phase string, done, _ int) {
			if phase == "step" && wrote < 40 {
				require.NoError(t, e.write("run_new", fmt.Sprintf("output/f%02d.md", wrote), fmt.Sprintf("file %d\n", wrote)))
				wrote++
			}
		}}})
	require.NoError(t, err)
	require.Positive(t, wrote)
	for i := range wrote {
		got, err := e.s.Runs.Workspace("run_new", runs.HostScope).Read(e.ctx, vfs.MustPath(fmt.Sprintf("output/f%02d.md", i)), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, fmt.Sprintf("file %d\n", i), string(got.Content))
	}
	storetest.RequireSound(t, e.s)
}

// TestReclaimWaitsOutTheGrace: with a grace, what a deletion left young
// stays a candidate and is freed by a reclaim once the grace has passed.
func TestReclaimWaitsOutTheGrace(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{ReclaimGrace: wsstore.DefaultGCGrace})
	e.run("chat-1", "run_1", nil)
	require.NoError(t, e.write("run_1", "output/a.md", "young content\n"))
	e.finish("run_1")
	require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_1"))
	rep, err := e.s.Reclaim(e.ctx)
	require.NoError(t, err)
	assert.Zero(t, rep.GC.Freed.Blobs)
	assert.Positive(t, rep.GC.Kept.Trees)
	assert.Positive(t, e.rows("gc_candidates"))
	e.clock.Advance(wsstore.DefaultGCGrace + 1)
	rep, err = e.s.Reclaim(e.ctx)
	require.NoError(t, err)
	assert.Positive(t, rep.GC.Freed.Blobs)
	assert.False(t, e.has(cas.Sum([]byte("young content\n"))))
	assert.Zero(t, e.rows("gc_candidates"))
}

// TestGCWithoutGraceForgetsDeferredCandidates: a gc without a grace
// (wsctl gc --grace 0, whole or in steps) frees what a reclaim deferred
// for its grace and forgets those candidates with the rest: its mark
// judged every one of them. A gc with the default grace leaves them
// queued, due once their grace has passed.
func TestGCWithoutGraceForgetsDeferredCandidates(t *testing.T) {
	for name, gc := range map[string]func(e *retEnv, grace time.Duration) error{
		"GC": func(e *retEnv, grace time.Duration) error {
			_, err := e.s.GC(e.ctx, wsstore.GCOptions{Grace: grace})
			return err
		},
		"CollectSteps": func(e *retEnv, grace time.Duration) error {
			_, err := e.s.CollectSteps(e.ctx, wsstore.GCStepOptions{GCOptions: wsstore.GCOptions{Grace: grace}})
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			e := newRetEnv(t, wsstore.Options{ReclaimGrace: wsstore.DefaultGCGrace})
			e.t = t
			e.run("chat-1", "run_1", nil)
			require.NoError(t, e.write("run_1", "output/a.md", "young content\n"))
			e.finish("run_1")
			require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_1"))
			rep, err := e.s.Reclaim(e.ctx)
			require.NoError(t, err)
			require.Positive(t, rep.GC.Kept.Trees, "the reclaim deferred the young trees")
			deferred := e.rows("gc_candidates")
			require.Positive(t, deferred)

			e.clock.Advance(time.Minute)
			require.NoError(t, gc(e, 0))
			assert.Equal(t, deferred, e.rows("gc_candidates"), "the default grace judged none of them")
			require.NoError(t, gc(e, -1))
			assert.False(t, e.has(cas.Sum([]byte("young content\n"))), "no grace frees it")
			assert.Zero(t, e.rows("gc_candidates"), "no grace forgets what it judged")
		})
	}
}

func (e *retEnv) has(h cas.Hash) bool {
	ok, err := e.s.Blobs.Has(e.ctx, h)
	require.NoError(e.t, err)
	return ok
}

// TestReclaimBackfillsTreeRefs: in a store whose trees predate the lists
// of what they name, the first reclaim fills them in and then collects
// as any other.
func TestReclaimBackfillsTreeRefs(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	for i := range 3 {
		id := fmt.Sprintf("run_%d", i)
		e.run("chat-1", id, nil)
		require.NoError(t, e.write(id, "output/a.md", fmt.Sprintf("content %d\n", i)))
		require.NoError(t, e.write(id, "output/shared.md", "shared\n"))
		e.finish(id)
	}
	refs := e.rows("tree_refs")
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(e.ctx, `DELETE FROM tree_refs`)
		if err == nil {
			_, err = tx.ExecContext(e.ctx, `INSERT INTO tree_refs_backfill (id, after) VALUES (1, x'')`)
		}
		return err
	}))
	require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_0"))
	rep, err := e.s.Reclaim(e.ctx)
	require.NoError(t, err)
	assert.Zero(t, e.rows("tree_refs_backfill"))
	assert.False(t, e.has(cas.Sum([]byte("content 0\n"))))
	assert.True(t, e.has(cas.Sum([]byte("shared\n"))))
	assert.Positive(t, rep.GC.Freed.Trees)
	assert.Less(t, e.rows("tree_refs"), refs, "the lists of the trees freed went with them")
	storetest.RequireSound(t, e.s)
}

// TestScratchFreedWhenCollected: on a store that prunes automatically, a
// run's end frees its scratch/ right away, records the collection and the
// bytes in the deletion log, and the byte cap stops counting the scratch
// versions its checkpoints no longer hold.
func TestScratchFreedWhenCollected(t *testing.T) {
	on := true
	e := newRetEnv(t, wsstore.Options{Runs: runs.Options{AutoPrune: &on}})
	e.run("chat-1", "run_s", nil)
	require.NoError(t, e.write("run_s", "output/main.md", "the answer\n"))
	var notes []string
	for i := range 4 {
		n := strings.Repeat(fmt.Sprintf("scratch note %d, never kept\n", i), 50)
		notes = append(notes, n)
		require.NoError(t, e.write("run_s", "scratch/notes.md", n))
	}
	var before int64
	require.NoError(t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		var err error
		before, err = e.s.Checkpoints.Retained(e.ctx, tx, "run_s")
		return err
	}))
	require.Positive(t, before, "the scratch versions count while the run is active")
	e.finish("run_s")

	for _, n := range notes {
		assert.False(t, e.has(cas.Sum([]byte(n))), "scratch is freed when it is collected")
	}
	assert.True(t, e.has(cas.Sum([]byte("the answer\n"))))
	var after int64
	require.NoError(t, e.s.DB.View(e.ctx, func(tx *index.Tx) error {
		var err error
		after, err = e.s.Checkpoints.Retained(e.ctx, tx, "run_s")
		return err
	}))
	assert.Zero(t, after, "the checkpoints keep nothing beyond the live tree once scratch is gone")
	ds := e.deletions()
	require.Len(t, ds, 2)
	assert.Equal(t, runs.DeletedScratch, ds[0].Kind)
	assert.Equal(t, "run_s", ds[0].RunID)
	assert.Equal(t, runs.Reclaimed, ds[1].Kind)
	assert.Positive(t, ds[1].BytesFreed)
	storetest.RequireSound(t, e.s)
}
