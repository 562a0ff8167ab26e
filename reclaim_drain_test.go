package wsstore_test

import (
	"context"
	"fmt"
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
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// takeStmt is the statement a step of the collection takes its
// candidates from the queue with.
const takeStmt = "DELETE FROM gc_candidates WHERE (hash, kind) IN (\n\t\tSELECT hash, kind FROM gc_candidates WHERE due <= ? ORDER BY due"

// drainSteps splits the statements a background collection ran into its
// steps, each beginning where it takes candidates from the queue; the
// test's own counts of rows are left out.
func drainSteps(stmts []string) [][]string {
	var steps [][]string
	for _, q := range stmts {
		if strings.HasPrefix(q, "SELECT count(*) FROM ") {
			continue
		}
		if strings.HasPrefix(q, takeStmt) {
			steps = append(steps, nil)
		}
		if len(steps) > 0 {
			steps[len(steps)-1] = append(steps[len(steps)-1], q)
		}
	}
	return steps
}

// backlogLeft builds, in dir, the backlog the activity of others chats
// queues (rollbacks, records, persist/ promotions: three candidates a
// chat), one draft of which a later run writes again, and closes the
// store, as a host that collects nothing in the background leaves it.
func backlogLeft(t *testing.T, dir string, clock *storetest.Clock, others int) (reused string) {
	ctx := context.Background()
	s, err := wsstore.Open(ctx, dir, wsstore.Options{Now: clock.Now, ReclaimGrace: -1, ReclaimIdle: -1, CAS: cas.Options{InlineDeltas: true}})
	require.NoError(t, err)
	e := &retEnv{t: t, ctx: ctx, s: s, clock: clock}
	for i := range others {
		e.chatActivity(activityRun(i))
	}
	_, reused = activityRun(others / 2)
	e.run("chat-new", "run_new", nil)
	require.NoError(t, e.write("run_new", "output/reused.md", abandonedOf(reused)))
	require.NoError(t, s.Close())
	return reused
}

// TestIdleStoreDrainsTheBacklog: a backlog of gc candidates a host left
// (more than one reclaim after a deletion takes) is collected by the
// store in the background once it is idle, without gc, Reclaim or a
// deletion: every abandoned draft is freed, what runs and persist/ layers
// hold stays (a draft written again by a later run included), and a full
// gc finds no file content left. Each step is one write transaction of at
// most maint.DefaultStepObjects candidates, its statements the same
// whatever the backlog.
func TestIdleStoreDrainsTheBacklog(t *testing.T) {
	maxStep := map[int]int{}
	for _, others := range []int{150, 300} {
		dir, clock := t.TempDir(), storetest.NewClock()
		reused := backlogLeft(t, dir, clock, others)

		tr := &tracer{}
		opts := wsstore.Options{Now: clock.Now, ReclaimGrace: -1, ReclaimIdle: 10 * time.Millisecond, CAS: cas.Options{InlineDeltas: true}}
		opts.Index.Trace = tr.trace
		tr.start()
		s, err := wsstore.Open(context.Background(), dir, opts)
		require.NoError(t, err)
		e := &retEnv{t: t, ctx: context.Background(), s: s, clock: clock}
		queued := e.rows("gc_candidates")
		require.Greater(t, queued, maint.DefaultBacklog, "more than a reclaim after a deletion takes")
		writes := s.DB.Writes()
		require.Eventually(t, func() bool { return e.rows("gc_candidates") == 0 }, time.Minute, 10*time.Millisecond,
			"the idle store drains the backlog")
		steps := drainSteps(tr.end())
		assert.Equal(t, uint64(len(steps)), s.DB.Writes()-writes, "one write transaction a step, nothing else written")
		assert.GreaterOrEqual(t, len(steps), queued/maint.DefaultStepObjects, "at most %d candidates a step", maint.DefaultStepObjects)
		for _, st := range steps {
			maxStep[others] = max(maxStep[others], len(st))
		}
		t.Logf("%d chats' activity: %d candidates queued, drained in %d steps of at most %d statements", others, queued, len(steps), maxStep[others])

		for i := range others {
			_, id := activityRun(i)
			if id != reused {
				assert.False(t, e.has(cas.Sum([]byte(abandonedOf(id)))), "%s's abandoned draft is freed", id)
			}
		}
		got, err := s.Runs.Workspace("run_new", runs.HostScope).Read(e.ctx, vfs.MustPath("output/reused.md"), vfs.ReadOptions{})
		require.NoError(t, err, "a candidate a later run holds is never freed")
		assert.Equal(t, abandonedOf(reused), string(got.Content))
		e.requireKept(0, others)
		gc, err := s.GC(e.ctx, wsstore.GCOptions{DryRun: true, Grace: -1})
		require.NoError(t, err)
		assert.Zero(t, gc.Freed.Blobs, "a full gc finds no file content left behind")
		page, _, err := s.Runs.Deletions(e.ctx, 0, 0)
		require.NoError(t, err)
		assert.Empty(t, page, "nothing was deleted and no reclaim ran")
		require.NoError(t, s.Close())
	}
	assert.Equal(t, maxStep[150], maxStep[300], "a step's statements do not grow with the backlog")
}

// TestDrainBesideGCAndDeletions: the background collection steps between
// a gc looping in steps, chat deletions with their own reclaims and new
// writes, all in the one process: the store stays sound, the backlog is
// drained, what the chats left still hold stays, and nothing is left for
// a full gc to free.
func TestDrainBesideGCAndDeletions(t *testing.T) {
	const others, deleted = 150, 50
	dir, clock := t.TempDir(), storetest.NewClock()
	reused := backlogLeft(t, dir, clock, others)
	s, err := wsstore.Open(context.Background(), dir, wsstore.Options{Now: clock.Now, ReclaimGrace: -1, ReclaimIdle: time.Millisecond})
	require.NoError(t, err)
	defer func() { require.NoError(t, s.Close()) }()
	e := &retEnv{t: t, ctx: context.Background(), s: s, clock: clock}

	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			_, err := s.CollectSteps(e.ctx, wsstore.GCStepOptions{GCOptions: wsstore.GCOptions{Grace: -1}})
			assert.NoError(t, err)
			time.Sleep(5 * time.Millisecond) // quiet enough for the background collection to step
		}
	})
	for i := range deleted {
		chat, _ := activityRun(i)
		_, err := s.Runs.DeleteChats(e.ctx, []runs.ChatKey{{Kind: "character", StableChatID: chat}}, false)
		require.NoError(t, err)
		require.NoError(t, e.write("run_new", fmt.Sprintf("output/n%02d.md", i), fmt.Sprintf("new %d\n", i)))
		time.Sleep(2 * time.Millisecond)
	}
	close(done)
	wg.Wait()
	require.Eventually(t, func() bool { return e.rows("gc_candidates") == 0 }, time.Minute, 10*time.Millisecond,
		"the idle store drains the backlog")
	storetest.RequireSound(t, s)
	for i := range others {
		_, id := activityRun(i)
		if id != reused {
			assert.False(t, e.has(cas.Sum([]byte(abandonedOf(id)))), "%s's abandoned draft is freed", id)
		}
	}
	got, err := s.Runs.Workspace("run_new", runs.HostScope).Read(e.ctx, vfs.MustPath("output/reused.md"), vfs.ReadOptions{})
	require.NoError(t, err)
	assert.Equal(t, abandonedOf(reused), string(got.Content))
	e.requireKept(deleted, others)
	gc, err := s.GC(e.ctx, wsstore.GCOptions{DryRun: true, Grace: -1})
	require.NoError(t, err)
	assert.Zero(t, gc.Freed.Blobs, "a full gc finds no file content left behind")
}

// TestCollectStepIsOneBoundedWrite: a step checks at most its bound of
// the candidates due, in one write transaction; with none due it takes
// no write lock and says when the earliest is due.
func TestCollectStepIsOneBoundedWrite(t *testing.T) {
	e := newRetEnv(t, wsstore.Options{})
	m := maint.New(maint.Parts{DB: e.s.DB, Blobs: e.s.Blobs, Trees: e.s.Trees, Runs: e.s.Runs, Checkpoints: e.s.Checkpoints,
		Events: e.s.Journal, Actors: e.s.Actors, Now: e.clock.Now})
	later := e.clock.Now().Add(time.Hour).UnixNano()
	gone := func(from, n int) []vfs.Candidate {
		cs := make([]vfs.Candidate, n)
		for i := range cs {
			cs[i] = vfs.Candidate{Kind: vfs.CandidateTree, Hash: cas.Sum(fmt.Appendf(nil, "gone %d", from+i))}
		}
		return cs
	}
	require.NoError(t, e.s.DB.Update(e.ctx, func(tx *index.Tx) error {
		if err := e.s.Trees.AddCandidates(e.ctx, tx, gone(0, 5), e.clock.Now().UnixNano()); err != nil {
			return err
		}
		return e.s.Trees.AddCandidates(e.ctx, tx, gone(5, 2), later)
	}))
	opt := maint.StepOptions{Objects: 3}
	for _, want := range []int{3, 2} {
		writes := e.s.DB.Writes()
		rep, next, queued, err := m.CollectStep(e.ctx, opt)
		require.NoError(t, err)
		assert.Equal(t, want, rep.Checked)
		assert.Equal(t, 1, rep.Steps)
		assert.Equal(t, uint64(1), e.s.DB.Writes()-writes, "one write transaction")
		assert.True(t, queued)
		if want == 2 {
			assert.Equal(t, later, next, "the earliest left is due later")
		}
	}
	writes := e.s.DB.Writes()
	rep, next, queued, err := m.CollectStep(e.ctx, opt)
	require.NoError(t, err)
	assert.Zero(t, rep.Steps)
	assert.Equal(t, writes, e.s.DB.Writes(), "nothing due: no write")
	assert.True(t, queued)
	assert.Equal(t, later, next)
	assert.Equal(t, 2, e.rows("gc_candidates"))
}
