package maint_test

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// TestCollectStepsKeepsRowsReusedBetweenSteps: a writer that, between two
// steps, stores again the content of rows the mark found garbage (the
// same files at the same paths, so the same blobs and trees) loses none of
// them: every later step keeps what a current root reaches, whatever the
// clocks say. Everything every root reaches reads back, and fsck is clean.
func TestCollectStepsKeepsRowsReusedBetweenSteps(t *testing.T) {
	for name, ahead := range map[string]time.Duration{
		// The collector's clock is an hour ahead: no row looks refreshed,
		// only the roots as they are at each step protect the re-used ones.
		"ClockAhead": time.Hour,
		"SameClock":  time.Nanosecond,
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			s := storetest.OpenStore(t)
			files := map[string]string{}
			for i := range 12 {
				files[fmt.Sprintf("output/d%d/f%02d.md", i%3, i)] = fmt.Sprintf("file %d\n%s", i, strings.Repeat("x", i*50))
			}
			createRun(t, s, "chat-1", "run_old")
			for p, c := range files {
				write(t, s, "run_old", p, c)
			}
			write(t, s, "run_old", "output/only-old.md", "gone for good\n")
			require.NoError(t, s.Runs.SetStatus(ctx, "run_old", runs.Cancelled, "test"))
			require.NoError(t, s.Runs.DeleteRun(ctx, "run_old"))

			m := newMaintainer(s)
			reused := false
			steps := 0
			rep, err := m.CollectSteps(ctx, maint.StepOptions{Objects: 1, GCOptions: maint.GCOptions{
				Grace: -1,
				Now:   func() time.Time { return time.Now().Add(ahead) },
				Progress: func(phase string, done, total int) {
					if phase != "step" {
						return
					}
					steps = done
					if done == 1 {
						// The first step has gone; the rest of the garbage
						// becomes live again.
						createRun(t, s, "chat-2", "run_new")
						for p, c := range files {
							write(t, s, "run_new", p, c)
						}
						reused = true
					}
				},
			}})
			require.NoError(t, err)
			require.True(t, reused)
			assert.Greater(t, steps, 1, "one row a step")
			assert.Positive(t, rep.Freed.Blobs+rep.Freed.Trees, "what nothing re-used went")

			storetest.RequireSound(t, s)
			ws := s.Runs.Workspace("run_new", runs.HostScope)
			for p, c := range files {
				res, err := ws.Read(ctx, vfs.MustPath(p), vfs.ReadOptions{})
				require.NoError(t, err, p)
				assert.Equal(t, c, string(res.Content), p)
			}
			cps, err := s.Checkpoints.List(ctx, "run_new")
			require.NoError(t, err)
			for _, cp := range cps {
				at := s.Runs.WorkspaceAt("run_new", cp.Seq, runs.HostScope)
				infos, err := at.List(ctx, vfs.Root(), 64)
				require.NoError(t, err)
				for _, fi := range infos {
					if fi.Kind == vfs.KindFile {
						_, err := at.Read(ctx, fi.Path, vfs.ReadOptions{})
						require.NoError(t, err, "%s at %s", fi.Path, cp.ID)
					}
				}
			}
		})
	}
}

// TestCollectStepsGrowWithRoots: each step reads every root again, so a
// store with many roots takes steps of at least one row per
// RootsPerStepObject roots, not opt.Objects: fewer steps than rows.
func TestCollectStepsGrowWithRoots(t *testing.T) {
	ctx := context.Background()
	s := storetest.OpenStore(t)
	createRun(t, s, "chat-1", "run_keep")
	for i := range 60 { // a checkpoint each: 60 roots and more
		write(t, s, "run_keep", "output/a.md", fmt.Sprintf("version %d\n", i))
	}
	createRun(t, s, "chat-2", "run_old")
	for i := range 10 {
		write(t, s, "run_old", fmt.Sprintf("output/d%d/f.md", i), fmt.Sprintf("old %d\n", i))
	}
	require.NoError(t, s.Runs.SetStatus(ctx, "run_old", runs.Cancelled, "test"))
	require.NoError(t, s.Runs.DeleteRun(ctx, "run_old"))

	steps := 0
	rep, err := newMaintainer(s).CollectSteps(ctx, maint.StepOptions{Objects: 1, GCOptions: maint.GCOptions{
		Grace: -1, Now: func() time.Time { return time.Now().Add(time.Hour) },
		Progress: func(phase string, done, total int) {
			if phase == "step" {
				steps = total
			}
		},
	}})
	require.NoError(t, err)
	freed := rep.Freed.Blobs + rep.Freed.Chunks + rep.Freed.Trees
	require.Greater(t, freed, 10)
	assert.Less(t, steps, freed, "steps of more than one row: the roots set their size")
	storetest.RequireSound(t, s)
}

// TestCollectStepsOfAnySizeCountTheirSteps: steps as large as an int
// holds are one step, and Progress says so ("step" 1 of 1), where the
// count of steps overflowed.
func TestCollectStepsOfAnySizeCountTheirSteps(t *testing.T) {
	ctx := context.Background()
	s := storetest.OpenStore(t)
	createRun(t, s, "chat-1", "run_old")
	for i := range 4 {
		write(t, s, "run_old", fmt.Sprintf("output/f%d.md", i), fmt.Sprintf("file %d\n", i))
	}
	require.NoError(t, s.Runs.SetStatus(ctx, "run_old", runs.Cancelled, "test"))
	require.NoError(t, s.Runs.DeleteRun(ctx, "run_old"))
	var got [][2]int
	rep, err := newMaintainer(s).CollectSteps(ctx, maint.StepOptions{Objects: math.MaxInt, GCOptions: maint.GCOptions{
		Grace: -1,
		Progress: func(phase string, done, total int) {
			if phase == "step" {
				got = append(got, [2]int{done, total})
			}
		},
	}})
	require.NoError(t, err)
	assert.Positive(t, rep.Freed.Blobs+rep.Freed.Trees)
	assert.Equal(t, [][2]int{{1, 1}}, got)
}
