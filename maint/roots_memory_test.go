package maint_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/actors"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
)

// manyRoots opens a store of one small run copied into runs runs of
// cps checkpoints each, all of one chat, and an actor space of versions
// versions, every root the first run's tree: written through the owners'
// import calls in one transaction, so a test gets many roots cheaply.
func manyRoots(t *testing.T, nRuns, cps, versions int) *wsstore.Store {
	t.Helper()
	s := storetest.OpenStore(t)
	ctx := context.Background()
	createRun(t, s, "chat-1", "run_a")
	write(t, s, "run_a", "output/a.md", "a file every root holds\n")
	require.NoError(t, s.DB.Update(ctx, func(tx *index.Tx) error {
		src, err := s.Runs.ExportRun(ctx, tx, "run_a")
		if err != nil {
			return err
		}
		for i := range nRuns {
			r := src
			r.ID, r.HeadCheckpoint = fmt.Sprintf("run_copy_%06d", i), 0
			if _, err := s.Runs.ImportRun(ctx, tx, r); err != nil {
				return err
			}
			for seq := 1; seq <= cps; seq++ {
				err := s.Checkpoints.ImportRecord(ctx, tx, checkpoint.Record{RunID: r.ID, Seq: int64(seq), Root: r.Root, Reason: "test", CreatedAt: r.CreatedAt})
				if err != nil {
					return err
				}
			}
		}
		if _, err := s.Actors.ImportSpace(ctx, tx, actors.SpaceRecord{Actor: "alice", Root: src.Root, Seq: int64(versions)}); err != nil {
			return err
		}
		for seq := 1; seq <= versions; seq++ {
			err := s.Actors.ImportChange(ctx, tx, actors.ChangeRecord{Actor: "alice", Seq: int64(seq), Op: "upload", Path: "a.md", Root: src.Root})
			if err != nil {
				return err
			}
		}
		return nil
	}))
	return s
}

// rootsGrowth runs gc, fsck, stats and du on a store of nRuns runs of
// cps checkpoints each and versions actor versions, and returns the
// least the heap grew in two runs of each.
func rootsGrowth(t *testing.T, nRuns, cps, versions int) map[string]uint64 {
	s := manyRoots(t, nRuns, cps, versions)
	m := newMaintainer(s)
	ctx := context.Background()
	later := func() time.Time { return time.Now().Add(time.Hour) }
	own, err := s.Checkpoints.Count(ctx, nil, "run_a")
	require.NoError(t, err)
	out := map[string]uint64{}
	out["gc"] = storetest.LeastHeapGrowth(2, func() {
		rep, err := m.GC(ctx, maint.GCOptions{Grace: -1, Now: later})
		require.NoError(t, err)
		require.Positive(t, rep.Reachable.Blobs)
	})
	out["gc in steps"] = storetest.LeastHeapGrowth(2, func() {
		_, err := m.CollectSteps(ctx, maint.StepOptions{GCOptions: maint.GCOptions{Grace: -1, Now: later}})
		require.NoError(t, err)
	})
	out["fsck"] = storetest.LeastHeapGrowth(2, func() {
		rep, err := m.Fsck(ctx, nil)
		require.NoError(t, err)
		require.True(t, rep.OK(), "%v", rep.Problems)
		require.Equal(t, nRuns+1, rep.Runs)
		require.Equal(t, nRuns*cps+int(own), rep.Checkpoints)
	})
	out["stats"] = storetest.LeastHeapGrowth(2, func() {
		st, err := m.Stats(ctx)
		require.NoError(t, err)
		require.Equal(t, int64(nRuns*cps)+own, st.Checkpoints)
	})
	out["du"] = storetest.LeastHeapGrowth(2, func() {
		rows := 0
		require.NoError(t, m.DU(ctx, func(u maint.Usage) error {
			rows++
			if u.RunID != "" && u.RunID != "run_a" {
				require.Equal(t, int64(cps), u.Checkpoints)
			}
			return nil
		}))
		require.Equal(t, nRuns+2, rows, "the chat's row and one a run")
	})
	return out
}

// TestMaintenanceMemoryDoesNotGrowWithRoots: gc (whole and in steps),
// fsck, stats and du of a store of 50× the runs, checkpoints and actor
// versions grow the heap by about what they do for the smaller store
// (about 1 MiB more, as much at 200×): the roots are read from their
// owners as the walks go, not listed. Listing them grew the heap 25 MiB
// more for the larger store here; the bound sits between.
func TestMaintenanceMemoryDoesNotGrowWithRoots(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a store of 100,000 checkpoints")
	}
	const nRuns, cps, versions = 20, 100, 40
	small, large := rootsGrowth(t, nRuns, cps, versions), rootsGrowth(t, 50*nRuns, cps, 50*versions)
	for _, op := range []string{"gc", "gc in steps", "fsck", "stats", "du"} {
		t.Logf("%s: heap grew by at most %.1f MiB at %d roots, %.1f MiB at %d", op,
			float64(small[op])/(1<<20), nRuns*(cps+2)+versions, float64(large[op])/(1<<20), 50*(nRuns*(cps+2)+versions))
		assert.Less(t, int64(large[op])-int64(small[op]), int64(4<<20), "%s: the heap grows with the roots", op)
	}
}
