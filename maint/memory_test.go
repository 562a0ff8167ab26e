package maint_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// manyObjects opens a store holding about n objects a root reaches (n
// small files in n/100 directories of one run, written in one change and
// checkpointed, whose tree an actor space holds too, its totals kept) and
// n/2 small blobs none does, all put in one transaction each. Its tree
// cache is bounded at 512 entries, so at every size the test builds the
// cache is full and what grows beyond it is measured.
func manyObjects(t *testing.T, n int) *wsstore.Store {
	t.Helper()
	s := storetest.OpenStoreWith(t, wsstore.Options{TreeCacheEntries: 512})
	ctx := context.Background()
	createRun(t, s, "chat-1", "run_a")
	edits := make([]runs.Edit, 0, n)
	for i := range n {
		edits = append(edits, runs.Edit{
			Path:    vfs.MustPath(fmt.Sprintf("output/d%03d/f%06d.txt", i%(n/100), i)),
			Content: fmt.Appendf(nil, "file %d: %d\n", i, i*7919),
		})
	}
	_, err := s.Runs.Workspace("run_a", runs.HostScope).Apply(ctx, edits)
	require.NoError(t, err)
	// The space's row is written as an import would leave it: fsck holds
	// its totals to the whole tree.
	run, err := s.Runs.Run(ctx, "run_a")
	require.NoError(t, err)
	tot, err := s.Trees.TotalsDelta(ctx, nil, vfs.EmptyTree, run.Root)
	require.NoError(t, err)
	require.GreaterOrEqual(t, tot.Files, int64(n))
	require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
		_, err := tx.ExecContext(ctx, `INSERT INTO actor_spaces (actor, root, seq, created, updated, files, dirs, bytes, versions)
			VALUES ('alice', ?, 0, 0, 0, ?, ?, ?, 0)`, run.Root, tot.Files, tot.Dirs, tot.Bytes)
		return err
	}))
	garbage(t, s, n/2, "first")
	return s
}

// garbage puts n blobs no root reaches in one transaction.
func garbage(t *testing.T, s *wsstore.Store, n int, tag string) {
	t.Helper()
	ctx := context.Background()
	require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
		for i := range n {
			if _, err := s.Blobs.PutBytes(ctx, tx, fmt.Appendf(nil, "garbage %s %d", tag, i)); err != nil {
				return err
			}
		}
		return nil
	}))
}

// maintGrowth runs every maintenance operation on a store of about n
// reachable and n/2 unreachable objects, and returns the most the heap
// grew during each: the lower of two runs, as what a run measures beyond
// what the operation holds (garbage the collector has not reached yet)
// only adds. A collection gets fresh garbage before each run.
func maintGrowth(t *testing.T, n int) map[string]uint64 {
	s := manyObjects(t, n)
	m := newMaintainer(s)
	ctx := context.Background()
	later := func() time.Time { return time.Now().Add(time.Hour) }
	out := map[string]uint64{}
	runs := 0
	measure := func(op string, fn func()) {
		for range 2 {
			if strings.HasPrefix(op, "gc") && op != "gc dry run" {
				runs++
				garbage(t, s, n/2, fmt.Sprint("run ", runs))
			}
			g := storetest.HeapGrowth(fn)
			if prev, ok := out[op]; !ok || g < prev {
				out[op] = g
			}
		}
	}
	measure("stats", func() {
		_, err := m.Stats(ctx)
		require.NoError(t, err)
	})
	measure("du", func() {
		_, err := collectDU(ctx, m)
		require.NoError(t, err)
	})
	measure("fsck", func() {
		rep, err := m.Fsck(ctx, nil)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%v", rep.Problems)
		require.GreaterOrEqual(t, rep.Blobs, n+n/2)
	})
	measure("gc dry run", func() {
		rep, err := m.GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
		require.NoError(t, err)
		require.Equal(t, n/2, rep.Freed.Blobs)
	})
	// The store's first garbage goes with the first run of the steps.
	require.NoError(t, func() error {
		_, err := m.GC(ctx, maint.GCOptions{Grace: -1, Now: later})
		return err
	}())
	measure("gc in steps", func() {
		rep, err := m.CollectSteps(ctx, maint.StepOptions{GCOptions: maint.GCOptions{Grace: -1, Now: later}})
		require.NoError(t, err)
		require.Equal(t, n/2, rep.Freed.Blobs)
	})
	measure("gc", func() {
		rep, err := m.GC(ctx, maint.GCOptions{Grace: -1, Now: later})
		require.NoError(t, err)
		require.Equal(t, n/2, rep.Freed.Blobs)
		require.GreaterOrEqual(t, rep.Reachable.Blobs, n)
	})
	return out
}

// TestMaintenanceMemoryDoesNotGrowWithObjects: fsck, gc (whole and in
// steps), stats and du of a store of 4N objects grow the heap no more than
// those of a store of N do, beyond a small constant: the objects are read
// a page at a time and every work set past a bound (lowered here to 512
// objects, so both stores are past it) goes to disk.
func TestMaintenanceMemoryDoesNotGrowWithObjects(t *testing.T) {
	if testing.Short() {
		t.Skip("builds stores of 25,000 objects")
	}
	defer maint.SetSpillAfter(512)()
	const n = 5000
	small, large := maintGrowth(t, n), maintGrowth(t, 4*n)
	for _, op := range []string{"stats", "du", "fsck", "gc dry run", "gc in steps", "gc"} {
		t.Logf("%s: heap grew by at most %.1f MiB at %d files, %.1f MiB at %d", op,
			float64(small[op])/(1<<20), n, float64(large[op])/(1<<20), 4*n)
		assert.Less(t, int64(large[op])-int64(small[op]), int64(3<<19), "%s: the heap grows with the store", op)
	}
}
