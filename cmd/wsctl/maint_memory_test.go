package main

import (
	"context"
	"flag"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

var maintStores = flag.Bool("wsctl.maintstores", false, "measure fsck, gc, stats and du on a 20,000-file store and a store of 100,000 objects")

// TestMaintenanceMemory runs fsck, gc, stats and du in wsctl children on
// a store of many files and records their peak RSS. The files sit in a
// few large directories and are written a few at a time, one checkpoint
// each step, so the store holds a thousand versions of each directory
// (patched trees) as an agent's run leaves them: 2,000 files by default;
// with -wsctl.maintstores 20,000 files (under 128 MiB) and 100,000 files,
// over 100,000 objects (under 256 MiB).
func TestMaintenanceMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs wsctl as a child")
	}
	type store struct {
		files, dirs, steps int
		limit              int64
	}
	cases := []store{{2000, 4, 100, 64 << 20}}
	if *maintStores {
		cases = []store{{20000, 10, 1000, 128 << 20}, {100000, 50, 1000, 256 << 20}}
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.files), func(t *testing.T) {
			ctx := context.Background()
			c := newCLI(t)
			st := c.open()
			run := c.seedRun(st, "run_many")
			ws := st.Runs.Workspace(run.ID, runs.HostScope)
			batch := tc.files / tc.steps
			for i := 0; i < tc.files; i += batch {
				var edits []runs.Edit
				for j := i; j < min(i+batch, tc.files); j++ {
					edits = append(edits, runs.Edit{
						Path:    vfs.MustPath(fmt.Sprintf("output/d%03d/f%06d.txt", j%tc.dirs, j)),
						Content: fmt.Appendf(nil, "file %d: some text that differs %d\n", j, j*7919),
					})
				}
				_, err := ws.Apply(ctx, edits)
				require.NoError(t, err)
			}
			stats, err := st.Stats(ctx)
			require.NoError(t, err)
			require.NoError(t, st.Close())
			t.Logf("%d files: %d blobs, %d trees, %d checkpoints", tc.files, stats.Blobs, stats.Trees, stats.Checkpoints)
			for _, cmd := range []string{"stats", "du", "fsck", "gc"} {
				r := childRun(t, c.store, "", nil, cmd)
				require.Equal(t, 0, r.code, r.err)
				t.Logf("%s on %d files: peak RSS %.1f MiB", cmd, tc.files, float64(r.hwm)/(1<<20))
				assert.Less(t, r.hwm, tc.limit, "%s peak RSS", cmd)
			}
		})
	}
}

var maintObjects = flag.Int("wsctl.maintobjects", 0, "measure fsck, gc, stats and du on a store of this many files, written 10,000 at a time (e.g. 1000000)")

// TestMaintenanceMemoryAtScale runs fsck, gc, stats and du in wsctl
// children on a store of -wsctl.maintobjects files (1,000 to a directory,
// 10,000 a change, one checkpoint each) and records their peak RSS, which
// must stay under 256 MiB: their memory does not grow with the objects.
func TestMaintenanceMemoryAtScale(t *testing.T) {
	if *maintObjects == 0 {
		t.Skip("-wsctl.maintobjects N builds a store of N files")
	}
	ctx := context.Background()
	c := newCLI(t)
	st := c.open()
	run := c.seedRun(st, "run_many")
	ws := st.Runs.Workspace(run.ID, runs.HostScope)
	n := *maintObjects
	for i := 0; i < n; i += 10000 {
		var edits []runs.Edit
		for j := i; j < min(i+10000, n); j++ {
			edits = append(edits, runs.Edit{
				Path:    vfs.MustPath(fmt.Sprintf("output/d%04d/f%07d.txt", j/1000, j)),
				Content: fmt.Appendf(nil, "file %d: some text that differs %d\n", j, j*7919),
			})
		}
		_, err := ws.Apply(ctx, edits)
		require.NoError(t, err)
	}
	stats, err := st.Stats(ctx)
	require.NoError(t, err)
	require.NoError(t, st.Close())
	t.Logf("%d files: %d blobs, %d trees, %d checkpoints", n, stats.Blobs, stats.Trees, stats.Checkpoints)
	for _, cmd := range []string{"stats", "du", "fsck", "gc"} {
		r := childRun(t, c.store, "", nil, cmd)
		require.Equal(t, 0, r.code, r.err)
		t.Logf("%s on %d files: peak RSS %.1f MiB", cmd, n, float64(r.hwm)/(1<<20))
		assert.Less(t, r.hwm, int64(256<<20), "%s peak RSS", cmd)
	}
}
