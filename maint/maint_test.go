package maint_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/wsstore/wsstore"
	"github.com/wsstore/wsstore/cas"
	"github.com/wsstore/wsstore/checkpoint"
	"github.com/wsstore/wsstore/index"
	"github.com/wsstore/wsstore/internal/storetest"
	"github.com/wsstore/wsstore/journal"
	"github.com/wsstore/wsstore/maint"
	"github.com/wsstore/wsstore/runs"
	"github.com/wsstore/wsstore/vfs"
)

// The owners implement the parts.
var (
	_ maint.DB              = (*index.DB)(nil)
	_ maint.Blobs           = (*cas.Store)(nil)
	_ maint.Trees           = (*vfs.Trees)(nil)
	_ maint.RunRoots        = (*runs.Service)(nil)
	_ maint.CheckpointRoots = (*checkpoint.Store)(nil)
	_ maint.EventRuns       = (*journal.Journal)(nil)
)

// parts returns the owners of s as maint's parts.
func parts(s *wsstore.Store) maint.Parts {
	p := maint.Parts{DB: s.DB, Blobs: s.Blobs, Runs: s.Runs}
	p.Trees, p.Checkpoints, p.Events, p.Actors = s.Trees, s.Checkpoints, s.Journal, s.Actors
	return p
}

func newMaintainer(s *wsstore.Store) *maint.Maintainer { return maint.New(parts(s)) }

// twoRuns opens a store with one chat and two runs that write a file of
// their own each and one file both hold.
func twoRuns(t *testing.T) *wsstore.Store {
	t.Helper()
	s := storetest.OpenStore(t)
	createRun(t, s, "chat-1", "run_a")
	createRun(t, s, "chat-1", "run_b")
	write(t, s, "run_a", "output/a.md", "only a\n")
	write(t, s, "run_b", "output/b.md", "only b\n")
	write(t, s, "run_b", "output/shared.md", "both\n")
	write(t, s, "run_a", "output/shared.md", "both\n")
	return s
}

// twoRunsOneGone is twoRuns with run_b cancelled and deleted: its own
// file is garbage for gc.
func twoRunsOneGone(t *testing.T) *wsstore.Store {
	t.Helper()
	s := twoRuns(t)
	ctx := context.Background()
	require.NoError(t, s.Runs.SetStatus(ctx, "run_b", runs.Cancelled, "test"))
	require.NoError(t, s.Runs.DeleteRun(ctx, "run_b"))
	return s
}

// failingTreeSweep is a tree store whose sweep fails after deleting what
// it was given, as an I/O error at the end of a sweep would.
type failingTreeSweep struct{ maint.Trees }

var errSweep = errors.New("disk gone")

func (f failingTreeSweep) SweepTrees(ctx context.Context, tx *index.Tx, hs []cas.Hash, cutoff int64, fn func(int, int64, bool) error) error {
	if err := f.Trees.SweepTrees(ctx, tx, hs, cutoff, fn); err != nil {
		return err
	}
	return errSweep
}

// TestGCSweepAllOrNothing: a sweep that fails part way deletes nothing,
// blobs swept before the failure included.
func TestGCSweepAllOrNothing(t *testing.T) {
	s := twoRunsOneGone(t)
	ctx := context.Background()
	p := parts(s)
	p.Trees = failingTreeSweep{p.Trees}
	m := maint.New(p)
	later := func() time.Time { return time.Now().Add(time.Hour) }
	plan, err := m.GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	require.Positive(t, plan.Freed.Blobs)
	require.Positive(t, plan.Freed.Trees)

	_, err = m.GC(ctx, maint.GCOptions{Grace: -1, Now: later})

	require.ErrorIs(t, err, errSweep)
	again, err := newMaintainer(s).GC(ctx, maint.GCOptions{DryRun: true, Grace: -1, Now: later})
	require.NoError(t, err)
	assert.Equal(t, plan, again, "nothing was deleted")
}

func createRun(t *testing.T, s *wsstore.Store, chat, runID string) {
	t.Helper()
	_, err := s.Runs.CreateRun(context.Background(), runs.CreateRequest{
		Chat: runs.ChatKey{Kind: "character", StableChatID: chat}, RunID: runID,
	})
	require.NoError(t, err)
}

func write(t *testing.T, s *wsstore.Store, runID, path, content string) {
	t.Helper()
	_, err := s.Runs.Workspace(runID, runs.HostScope).Write(context.Background(), vfs.MustPath(path), []byte(content), vfs.WriteOptions{})
	require.NoError(t, err)
}

// TestMaintainerOverOwners: a Maintainer built from the owners alone finds
// what the store's own maintenance finds.
func TestMaintainerOverOwners(t *testing.T) {
	s := twoRuns(t)
	ctx := context.Background()
	m := newMaintainer(s)

	rep, err := m.Fsck(ctx, nil)
	require.NoError(t, err)
	assert.True(t, rep.OK(), "%v", rep.Problems)
	assert.Equal(t, 2, rep.Runs)

	want, err := s.Stats(ctx)
	require.NoError(t, err)
	got, err := m.Stats(ctx)
	require.NoError(t, err)
	want.FileBytes, got.FileBytes = 0, 0
	assert.Equal(t, want, got)
	assert.Equal(t, int64(1), got.Chats)

	du, err := collectDU(ctx, m)
	require.NoError(t, err)
	require.Len(t, du, 3, "the chat's persist layer and two runs")
	assert.Equal(t, "", du[0].RunID)
	assert.Equal(t, []string{"run_a", "run_b"}, []string{du[1].RunID, du[2].RunID})
	stop := errors.New("stop")
	rows := 0
	err = m.DU(ctx, func(maint.Usage) error { rows++; return stop })
	assert.ErrorIs(t, err, stop, "fn's error ends DU and is its error")
	assert.Equal(t, 1, rows)

	dry, err := m.GC(ctx, maint.GCOptions{DryRun: true, Grace: -1})
	require.NoError(t, err)
	assert.True(t, dry.DryRun)
	assert.Positive(t, dry.Reachable.Blobs)
}

// TestConcurrentMaintenance runs GC, Stats and DU side by side while a run
// writes: each sees one snapshot, and no live file loses its content.
func TestConcurrentMaintenance(t *testing.T) {
	s := storetest.OpenStore(t)
	ctx := context.Background()
	createRun(t, s, "c", "run_a")
	m := newMaintainer(s)

	const writes = 60
	content := func(i int) string { return fmt.Sprintf("version %d\n", i%5) }
	var wg sync.WaitGroup
	stop := make(chan struct{})
	errs := make(chan error, 16)
	loop := func(fn func() error) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if err := fn(); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	loop(func() error { _, err := m.GC(ctx, maint.GCOptions{Grace: -1}); return err })
	loop(func() error { _, err := m.Stats(ctx); return err })
	loop(func() error { _, err := collectDU(ctx, m); return err })
	for i := range writes {
		write(t, s, "run_a", fmt.Sprintf("output/f%d.md", i%3), content(i))
	}
	close(stop)
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	for i := writes - 3; i < writes; i++ {
		res, err := s.Runs.Workspace("run_a", runs.HostScope).Read(ctx, vfs.MustPath(fmt.Sprintf("output/f%d.md", i%3)), vfs.ReadOptions{})
		require.NoError(t, err)
		assert.Equal(t, content(i), string(res.Content))
	}
}

// collectDU returns every row m.DU hands on.
func collectDU(ctx context.Context, m *maint.Maintainer) ([]maint.Usage, error) {
	var out []maint.Usage
	err := m.DU(ctx, func(u maint.Usage) error { out = append(out, u); return nil })
	return out, err
}
