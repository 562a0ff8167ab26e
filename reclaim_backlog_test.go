package wsstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// chatActivity is one chat's ordinary use, which records gc candidates
// without deleting anything, three per chat: a draft written and rolled
// back (the abandoned draft is garbage), tool calls recorded (each after
// the first replaces the run's records tree), and a persist/ promotion at
// the run's end (the chat's first replaces the empty tree, which is no
// candidate).
func (e *retEnv) chatActivity(chat, runID string) {
	off := false
	e.run(chat, runID, &runs.Profile{AutoCheckpoint: &off})
	require.NoError(e.t, e.write(runID, "output/answer.md", answerOf(runID)))
	cp, err := e.s.Runs.Checkpoint(e.ctx, runID, "answer")
	require.NoError(e.t, err)
	require.NoError(e.t, e.write(runID, "output/answer.md", abandonedOf(runID)))
	_, err = e.s.Runs.Rollback(e.ctx, runID, cp.Seq, runs.RollbackOptions{})
	require.NoError(e.t, err)
	for i := range 3 {
		_, err := e.s.Runs.RecordToolCall(e.ctx, runID, runs.ToolCallRecord{ID: fmt.Sprintf("call_%d", i), Name: "workspace.write",
			Args: json.RawMessage(fmt.Sprintf(`{"run":%q,"i":%d}`, runID, i))})
		require.NoError(e.t, err)
	}
	require.NoError(e.t, e.write(runID, "persist/memory.md", memoryOf(runID)))
	e.finish(runID)
}

// chatRun is a run of the chat deleted: an answer, tool calls and a
// persist/ promotion.
func (e *retEnv) chatRun(chat, runID string) {
	e.run(chat, runID, nil)
	require.NoError(e.t, e.write(runID, "output/answer.md", answerOf(runID)))
	for i := range 2 {
		_, err := e.s.Runs.RecordToolCall(e.ctx, runID, runs.ToolCallRecord{ID: fmt.Sprintf("call_%d", i), Name: "workspace.write",
			Args: json.RawMessage(fmt.Sprintf(`{"run":%q,"i":%d}`, runID, i))})
		require.NoError(e.t, err)
	}
	require.NoError(e.t, e.write(runID, "persist/memory.md", memoryOf(runID)))
	e.finish(runID)
}

func answerOf(runID string) string    { return runID + "'s answer\n" }
func abandonedOf(runID string) string { return runID + "'s abandoned draft\n" }
func memoryOf(runID string) string    { return runID + " remembers\n" }

func activityRun(i int) (chat, runID string) {
	return fmt.Sprintf("chat-%03d", i), fmt.Sprintf("run_%03d", i)
}

// backlogEnv is a store where chat-x's two runs were followed by the
// activity of `others` other chats, whose candidates are queued: from 100
// chats on, more than one reclaim takes.
func backlogEnv(t *testing.T, others int) (*retEnv, *tracer) {
	e, tr := openTraced(t, wsstore.Options{})
	e.chatRun("chat-x", "run_x1")
	e.chatRun("chat-x", "run_x2")
	for i := range others {
		e.chatActivity(activityRun(i))
	}
	return e, tr
}

var chatX = []runs.ChatKey{{Kind: "character", StableChatID: "chat-x"}}

// TestReclaimAfterADeletionTakesABoundedBacklog: deleting a two-run chat
// after the activity of 100 or 400 other chats runs the same statements:
// its reclaim frees all the chat held, and checks only
// maint.DefaultBacklog of the candidates the others' activity queued,
// leaving the rest queued.
func TestReclaimAfterADeletionTakesABoundedBacklog(t *testing.T) {
	counts := map[int]int{}
	for _, others := range []int{100, 400} {
		e, tr := backlogEnv(t, others)
		queued := e.rows("gc_candidates")
		tr.start()
		res, err := e.s.Runs.DeleteChats(e.ctx, chatX, false)
		stmts := tr.end()
		require.NoError(t, err)
		counts[others] = len(stmts)
		if others == 100 {
			var queue []string
			for _, q := range stmts {
				if strings.Contains(q, "gc_candidates") {
					queue = append(queue, q)
				}
			}
			for _, p := range queryPlans(t, e, queue) {
				assert.NotRegexp(t, regexp.MustCompile(`\bSCAN gc_candidates`), p, "the queue is read through its indexes")
			}
		}
		assert.Positive(t, res.BytesFreed)
		for _, id := range []string{"run_x1", "run_x2"} {
			assert.False(t, e.has(cas.Sum([]byte(answerOf(id)))), "%s's answer goes with the chat", id)
			assert.False(t, e.has(cas.Sum([]byte(memoryOf(id)))), "%s's persist/ goes with the chat", id)
		}
		_, last := activityRun(others - 1)
		assert.True(t, e.has(cas.Sum([]byte(abandonedOf(last)))), "the newest of the backlog waits")
		assert.Greater(t, e.rows("gc_candidates"), queued-maint.DefaultBacklog, "at most the bound was taken from the backlog")
		storetest.RequireSound(t, e.s)
	}
	t.Logf("statements of deleting a two-run chat after 100 and 400 chats' activity: %v", counts)
	assert.Equal(t, counts[100], counts[400], "the deletion's cost does not grow with the others' activity")
}

// TestBacklogDrainedByLaterDeletions: each later deletion takes its
// bounded share of the backlog, so a few of them leave none; then every
// abandoned draft is freed, what runs, checkpoints and persist/ layers
// hold stays (content written again by a new run included), and a full gc
// finds no file content left to free.
func TestBacklogDrainedByLaterDeletions(t *testing.T) {
	const others = 150
	e, tr := backlogEnv(t, others)
	_, err := e.s.Runs.DeleteChats(e.ctx, chatX, false)
	require.NoError(t, err)
	require.Positive(t, e.rows("gc_candidates"), "the deletion left a backlog")
	// Content a queued candidate alone named is written again.
	_, reused := activityRun(others - 1)
	e.run("chat-new", "run_new", nil)
	require.NoError(t, e.write("run_new", "output/reused.md", abandonedOf(reused)))

	var costs, queued []int
	for i := 0; e.rows("gc_candidates") > 0; i++ {
		queued = append(queued, e.rows("gc_candidates"))
		require.Less(t, i, 20, "later deletions drain the backlog: %v queued before each", queued)
		chat, _ := activityRun(i)
		tr.start()
		_, err := e.s.Runs.DeleteChats(e.ctx, []runs.ChatKey{{Kind: "character", StableChatID: chat}}, false)
		costs = append(costs, len(tr.end()))
		require.NoError(t, err)
	}
	t.Logf("candidates queued before, and statements of, the deletions that drained the backlog: %v, %v", queued, costs)
	for i := range others {
		_, id := activityRun(i)
		if id == reused {
			continue
		}
		assert.False(t, e.has(cas.Sum([]byte(abandonedOf(id)))), "%s's abandoned draft is freed", id)
	}
	got, err := e.s.Runs.Workspace("run_new", runs.HostScope).Read(e.ctx, vfs.MustPath("output/reused.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, abandonedOf(reused), string(got.Content))
	e.requireKept(len(costs), others)
	gc, err := e.s.GC(e.ctx, wsstore.GCOptions{DryRun: true, Grace: -1})
	require.NoError(t, err)
	assert.Zero(t, gc.Freed.Blobs, "a full gc finds no file content left behind")
}

// requireKept checks that the runs of activity chats from, to still hold
// their answers and persist/ layers.
func (e *retEnv) requireKept(from, to int) {
	for i := from; i < to; i++ {
		_, id := activityRun(i)
		ws := e.s.Runs.Workspace(id, runs.HostScope)
		for p, want := range map[string]string{"output/answer.md": answerOf(id), "persist/memory.md": memoryOf(id)} {
			got, err := ws.Read(e.ctx, vfs.MustPath(p), vfs.ReadOptions{})
			require.NoError(e.t, err, "%s %s", id, p)
			assert.Equal(e.t, want, string(got.Content))
		}
	}
	storetest.RequireSound(e.t, e.s)
}

// TestBacklogDrainedByMaintenance: gc (whole or in steps, as wsctl gc and
// batch gc run it) and Reclaim take the whole backlog
// a bounded reclaim left, a step at a time, and free what it named.
func TestBacklogDrainedByMaintenance(t *testing.T) {
	const others = 300
	for name, drain := range map[string]func(e *retEnv) error{
		"GC": func(e *retEnv) error {
			_, err := e.s.GC(e.ctx, wsstore.GCOptions{Grace: -1})
			return err
		},
		"CollectSteps": func(e *retEnv) error {
			_, err := e.s.CollectSteps(e.ctx, wsstore.GCStepOptions{GCOptions: wsstore.GCOptions{Grace: -1}})
			return err
		},
		"Reclaim": func(e *retEnv) error {
			rep, err := e.s.Reclaim(e.ctx)
			if err == nil {
				assert.Greater(t, rep.Checked, maint.DefaultBacklog)
			}
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			e, _ := backlogEnv(t, others)
			e.t = t
			_, err := e.s.Runs.DeleteChats(e.ctx, chatX, false)
			require.NoError(t, err)
			require.Positive(t, e.rows("gc_candidates"))
			blobs := e.rows("blobs")
			require.NoError(t, drain(e))
			assert.Zero(t, e.rows("gc_candidates"))
			assert.Less(t, e.rows("blobs"), blobs)
			for i := range others {
				_, id := activityRun(i)
				assert.False(t, e.has(cas.Sum([]byte(abandonedOf(id)))), "%s's abandoned draft is freed", id)
			}
			e.requireKept(0, others)
		})
	}
}

// TestBoundedReclaimInterrupted: a deletion's reclaim cut off anywhere in
// the backlog it takes (a crash, a cancelled context) commits the steps
// done and leaves the rest queued: a later Reclaim ends where an
// uninterrupted one does.
func TestBoundedReclaimInterrupted(t *testing.T) {
	const others = 200
	ref, tr := backlogEnv(t, others)
	tr.start()
	_, err := ref.s.Runs.DeleteChats(ref.ctx, chatX, false)
	stmts := tr.end()
	require.NoError(t, err)
	require.Positive(t, ref.rows("gc_candidates"), "the deletion left a backlog")
	_, err = ref.s.Reclaim(ref.ctx)
	require.NoError(t, err)
	want := [3]int{ref.rows("blobs"), ref.rows("trees"), ref.rows("tree_refs")}
	// The reclaim begins once the deletion has committed.
	first := -1
	for i, q := range stmts {
		if strings.Contains(q, "tree_refs_backfill") {
			first = i
			break
		}
	}
	require.Positive(t, first)
	for _, cut := range []int{first + 3, first + (len(stmts)-first)/2, len(stmts) - 3} {
		e, tr := backlogEnv(t, others)
		ctx, cancel := context.WithCancel(e.ctx)
		tr.stop = func(n int) {
			if n >= cut {
				cancel()
			}
		}
		tr.start()
		res, err := e.s.Runs.DeleteChats(ctx, chatX, false)
		tr.end()
		cancel()
		require.NoError(t, err, "the deletion stands")
		require.True(t, res.Chats[0].Found)
		storetest.RequireSound(t, e.s)
		_, err = e.s.Reclaim(e.ctx)
		require.NoError(t, err)
		assert.Equal(t, want, [3]int{e.rows("blobs"), e.rows("trees"), e.rows("tree_refs")}, "cut after %d of %d statements", cut, len(stmts))
		assert.Zero(t, e.rows("gc_candidates"))
	}
}

// TestBacklogLeftSaysWhetherCandidatesRemain: a collection whose backlog
// bound takes the last queued candidate leaves none, and says so; one
// that stops with a candidate still queued says it left some.
func TestBacklogLeftSaysWhetherCandidatesRemain(t *testing.T) {
	for _, tc := range []struct {
		name   string
		queued int
		left   bool
	}{{"BoundTakesTheLast", 3, false}, {"BoundLeavesOne", 4, true}, {"BelowTheBound", 2, false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := newRetEnv(t, wsstore.Options{})
			// Trees no row holds: each is checked and dropped, leading
			// to nothing more.
			cs := make([]vfs.Candidate, tc.queued)
			for i := range cs {
				cs[i] = vfs.Candidate{Kind: vfs.CandidateTree, Hash: cas.Sum([]byte(fmt.Sprintf("gone %d", i)))}
			}
			require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
				return e.s.Trees.AddCandidates(e.ctx, tx, cs, e.clock.Now().UnixNano())
			}))
			m := maint.New(maint.Parts{DB: e.s.DB, Blobs: e.s.Blobs, Trees: e.s.Trees, Runs: e.s.Runs, Checkpoints: e.s.Checkpoints,
				Events: e.s.Journal, Actors: e.s.Actors, Now: e.clock.Now})
			end, err := m.CandidatesEnd(e.ctx)
			require.NoError(t, err)
			rep, err := m.CollectAfter(e.ctx, maint.StepOptions{}, end, 3)
			require.NoError(t, err)
			assert.Equal(t, min(tc.queued, 3), rep.Backlog)
			assert.Equal(t, tc.left, rep.BacklogLeft)
			assert.Equal(t, max(tc.queued-3, 0), e.rows("gc_candidates"))
		})
	}
}

// TestWhatQueuesCandidatesAndCollectsNone: on a store without automatic
// pruning, each of these operations records gc candidates and runs no
// reclaim, so its candidates stay queued for the next reclaim or gc; the
// README names every one of them.
func TestWhatQueuesCandidatesAndCollectsNone(t *testing.T) {
	readme := readmeFile(t, "README.md")
	start := strings.Index(readme, "These record candidates too and collect none")
	end := strings.Index(readme, "(`TestWhatQueuesCandidatesAndCollectsNone`)")
	require.True(t, start >= 0 && end > start, "the README's list of what queues candidates")
	list := strings.Join(strings.Fields(readme[start:end]), " ")

	for _, tc := range []struct {
		named string // in the README's list
		setup func(e *retEnv)
		op    func(e *retEnv)
	}{
		{"rollbacks", func(e *retEnv) {
			e.run("c", "run_1", nil)
			require.NoError(t, e.write("run_1", "output/a.md", "one"))
		}, func(e *retEnv) {
			require.NoError(t, e.write("run_1", "output/a.md", "two"))
			_, err := e.s.Runs.Rollback(e.ctx, "run_1", 2, runs.RollbackOptions{})
			require.NoError(t, err)
		}},
		{"record operations", func(e *retEnv) {
			e.run("c", "run_1", nil)
			_, err := e.s.Runs.RecordToolCall(e.ctx, "run_1", runs.ToolCallRecord{ID: "call_1", Name: "workspace.write", Args: json.RawMessage(`{}`)})
			require.NoError(t, err)
		}, func(e *retEnv) {
			_, err := e.s.Runs.RecordToolCall(e.ctx, "run_1", runs.ToolCallRecord{ID: "call_2", Name: "workspace.write", Args: json.RawMessage(`{}`)})
			require.NoError(t, err)
		}},
		{"`maxCheckpoints`", func(e *retEnv) {
			e.run("c", "run_1", &runs.Profile{MaxCheckpoints: 2})
			require.NoError(t, e.write("run_1", "output/a.md", "one"))
		}, func(e *retEnv) {
			require.NoError(t, e.write("run_1", "output/a.md", "two"))
		}},
		{"`actor.gc`", func(e *retEnv) {
			for _, v := range []string{"one", "two"} {
				_, err := e.s.Actors.Upload(e.ctx, "alice", "notes.md", strings.NewReader(v))
				require.NoError(t, err)
			}
		}, func(e *retEnv) {
			_, err := e.s.Actors.GC(e.ctx, actors.GCOptions{KeepVersions: 1})
			require.NoError(t, err)
		}},
		{"a run's end", func(e *retEnv) {
			e.run("c", "run_1", nil)
			require.NoError(t, e.write("run_1", "persist/memory.md", "one"))
			e.finish("run_1")
			e.run("c", "run_2", nil)
			require.NoError(t, e.write("run_2", "persist/memory.md", "two"))
		}, func(e *retEnv) {
			e.finish("run_2")
		}},
		{"`run.delete`", func(e *retEnv) {
			e.run("c", "run_1", nil)
			require.NoError(t, e.write("run_1", "output/a.md", "one"))
			e.finish("run_1")
		}, func(e *retEnv) {
			require.NoError(t, e.s.Runs.DeleteRun(e.ctx, "run_1"))
		}},
	} {
		t.Run(tc.named, func(t *testing.T) {
			e := newRetEnv(t, wsstore.Options{})
			tc.setup(e)
			before := e.rows("gc_candidates")
			tc.op(e)
			assert.Greater(t, e.rows("gc_candidates"), before, "the operation queued candidates and collected none")
			page, _, err := e.s.Runs.Deletions(e.ctx, 0, 0)
			require.NoError(t, err)
			for _, d := range page {
				assert.NotEqual(t, runs.Reclaimed, d.Kind, "no reclaim ran")
			}
			assert.Contains(t, list, tc.named, "the README names it")
		})
	}
}
